package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/cairn-gateway/cairn/third_party/paho"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// dashboardConfig is cairn with the embedded broker and the units of the
// metrics that `cairn sim` publishes.
func dashboardConfig() string { return telemetryConfig(`{temperature: "°C", humidity: "%"}`, "") }

// simDevices are the devices `cairn sim -devices 20` publishes for.
func simDevices(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("sim-%04d", i)
	}
	return ids
}

// TestDashboard_Browser opens the page of a `cairn run` process in
// headless chromium, with `cairn sim` data for 20 devices: it loads
// without errors, shows every device and a chart per metric of the
// chosen device, the range buttons change the charts, a new reading
// shows without a reload, and the keyboard reaches every control; a
// device with 30 metrics is charted 12 at a time, reached with the
// keyboard through the next page and the filter by name.
//
// With CAIRN_SCREENSHOT set to a file name (relative to the repository's
// root), it writes a screenshot of the whole page there:
//
//	CAIRN_SCREENSHOT=docs/img/dashboard.png go test ./cmd/cairn -run TestDashboard_Browser
func TestDashboard_Browser(t *testing.T) {
	bin := cairnBinary.get(t)
	c := startCairn(t, bin, writeConfig(t, t.TempDir(), dashboardConfig()))
	devices := simDevices(20)
	// A day of readings before the simulation, so that every range has
	// something to draw.
	pub := mustConnect(t, c.mqtt, "history")
	publishHistory(t, pub, devices, 24*time.Hour, 10*time.Minute)
	runSimulation(t, bin, c.mqtt, len(devices), 3*time.Second)

	b := startBrowser(t)
	base := "http://" + c.http + "/"
	b.do(t, "open the page", chromedp.Navigate(base))
	checkDeviceList(t, b, devices)

	// The charts of one device: its link reloads the page.
	const device = "sim-0003"
	b.do(t, "choose "+device, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.WaitEvent(page.LoadEventFired, nil,
			chromedp.Click(chromedp.CSS(`[data-part="devices"] a[href^="?device=`+device+`&"]`)))(ctx, tg)
		return err
	}))
	if got := eval[string](t, b, `location.search`); !strings.Contains(got, "device="+device) {
		t.Fatalf("after choosing %s the page is %s", device, got)
	}
	eval[bool](t, b, `window.cairnTestMark = true`)
	checkCharts(t, b, []string{"humidity", "temperature"})
	b.checkProblems(t, "loading the page")
	if path := os.Getenv("CAIRN_SCREENSHOT"); path != "" {
		screenshot(t, b, path)
	}

	checkRanges(t, b)
	checkOvertaken(t, b)
	checkLiveReading(t, b, pub, device)
	checkKeyboard(t, b)
	if !eval[bool](t, b, `window.cairnTestMark === true`) {
		t.Error("the page was reloaded")
	}
	b.checkProblems(t, "using the page")
	checkManyMetrics(t, b, pub, base)
	b.checkProblems(t, "the pages of charts")
	checkPhone(t, b, base+"?device="+device)
	b.checkProblems(t, "the page on a phone")
}

// checkManyMetrics publishes 30 metrics of a device "wide" and opens its
// charts: 12 of them, with the keyboard the next page (Enter on its
// link) and the filter (a name typed and Enter); a range button and the
// refresh keep the filter; every control is reached with Tab.
func checkManyMetrics(t *testing.T, b *browser, pub paho.Client, base string) {
	t.Helper()
	names := publishWide(t, pub, "wide", 30)
	const captions = `[...document.querySelectorAll('[data-part="charts"] figcaption')].map(f => f.textContent.trim().replace(/^wide: /, "").split(" ")[0])`
	const pager = `(document.querySelector('[data-part="charts"] .pager') || {textContent: "no pager"}).textContent.replace(/\s+/g, " ").trim()`
	wantCharts := func(when string, metrics []string, says string) {
		t.Helper()
		waitJS(t, b, startTimeout, when+": the charts of "+strings.Join(metrics, " "),
			fmt.Sprintf(`JSON.stringify(%s) === %q && %s.includes(%q)`, captions, jsArray(metrics), pager, says),
			captions+`.join(" ") + " | " + `+pager)
	}
	b.do(t, "open the charts of wide", chromedp.Navigate(base+"?device=wide&range=24h"))
	wantCharts("page 1", names[:12], "wide has 30 metrics; charts of 1–12, 12 a page.")

	// enter focuses sel, types typed, and presses Enter, which loads a page.
	enter := func(what, sel, typed string) {
		t.Helper()
		b.do(t, what, chromedp.Focus(chromedp.CSS(sel)))
		if typed != "" {
			b.do(t, what, chromedp.KeyEvent(typed))
		}
		b.do(t, what, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.KeyEvent(kb.Enter))(ctx, tg)
			return err
		}))
	}
	enter("Enter on the next page's link", `[data-part="charts"] a[rel="next"]`, "")
	wantCharts("page 2", names[12:24], "Page 2 of 3")
	if got := eval[string](t, b, `location.search`); !strings.Contains(got, "page=2") {
		t.Errorf("the next page's link led to %s", got)
	}
	enter("type m002 and Enter in the filter", `#filter`, "m002")
	wantCharts("filter m002", names[20:30], "10 with “m002” in the name")

	b.do(t, "press 1h", chromedp.Click(chromedp.CSS(`form.ranges button[value="1h"]`)))
	waitJS(t, b, startTimeout, "the 1h charts of m002", `location.search.includes("range=1h") && location.search.includes("filter=m002") && `+
		`[...document.querySelectorAll('[data-part="charts"] svg desc')].every(d => d.textContent.includes("the 1 hour from"))`, `location.search`)
	wantCharts("1h, filter m002", names[20:30], "10 with “m002” in the name")
	// The next refresh of the charts part keeps the filter.
	eval[bool](t, b, `document.activeElement.blur(), document.querySelector('[data-part="charts"] figure').dataset.old = "1", true`)
	waitJS(t, b, 20*time.Second, "a refresh of the charts", `!document.querySelector('[data-part="charts"] figure[data-old]')`, pager)
	wantCharts("refreshed, filter m002", names[20:30], "10 with “m002” in the name")
	checkKeyboard(t, b)
}

// checkPhone loads the page at url in a phone's viewport (390 x 844 CSS
// pixels, 3 device pixels each, touch) and checks that the page does not
// scroll sideways, that every chart fits the screen, and that its text is
// at least 12 pixels high. A table may scroll inside its own box.
func checkPhone(t *testing.T, b *browser, url string) {
	t.Helper()
	b.do(t, "a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(3), chromedp.EmulateMobile, chromedp.EmulateTouch))
	defer b.do(t, "back to the desktop", chromedp.EmulateReset())
	b.do(t, "open the page on a phone", chromedp.Navigate(url))
	waitJS(t, b, startTimeout, "the charts on a phone", `document.querySelectorAll('[data-part="charts"] svg').length > 0`, `document.title`)
	// Content wider than the screen makes a phone's browser zoom out.
	if w := eval[int](t, b, `window.innerWidth`); w != 390 {
		t.Errorf("on a phone the page needs %d pixels of width and the browser zooms out to show it; want it to fit 390", w)
	}
	if got := eval[int](t, b, `document.documentElement.scrollWidth`); got > 390 {
		t.Errorf("on a phone the page is %d pixels wide and scrolls sideways; want at most 390", got)
	}
	wide := eval[string](t, b, `[...document.querySelectorAll('[data-part="charts"] svg')]
		.filter(s => s.getBoundingClientRect().right > 390 || s.getBoundingClientRect().left < 0)
		.map(s => s.querySelector("title, desc").textContent.slice(0, 40) + ": " + Math.round(s.getBoundingClientRect().width) + " px").join("; ")`)
	if wide != "" {
		t.Errorf("on a phone these charts do not fit the screen: %s", wide)
	}
	small := eval[string](t, b, `[...document.querySelectorAll("body *")]
		.filter(e => e.offsetParent !== null && [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim() !== "") && parseFloat(getComputedStyle(e).fontSize) < 12)
		.slice(0, 5).map(e => e.tagName + " " + getComputedStyle(e).fontSize + ": " + e.textContent.trim().slice(0, 30)).join("; ")`)
	if small != "" {
		t.Errorf("on a phone this text is smaller than 12 pixels: %s", small)
	}
}

// publishHistory publishes, for each device, readings of the metrics
// `cairn sim` sends (temperature and humidity, in its JSON) every step
// over the span up to now, with up to 100 PUBACKs outstanding.
func publishHistory(t *testing.T, pub paho.Client, devices []string, span, step time.Duration) {
	t.Helper()
	now := time.Now().Truncate(step)
	var pending []paho.Token
	for i, dev := range devices {
		for at := now.Add(-span); at.Before(now); at = at.Add(step) {
			// A daily swing, shifted per device, and a wiggle.
			phase := 2 * math.Pi * (float64(at.Unix()%86400)/86400 + float64(i)/20)
			temp := 21 + 3*math.Sin(phase) + 0.4*math.Sin(7*phase+float64(i))
			hum := 50 - 8*math.Sin(phase) + 1.5*math.Sin(5*phase)
			payload := fmt.Sprintf(`{"ts":%d,"temperature":%.2f,"humidity":%.2f}`, at.UnixMilli(), temp, hum)
			pending = append(pending, pub.Publish("sensors/"+dev+"/telemetry", 1, false, payload))
			if len(pending) == 100 {
				waitToken(t, pending[0])
				pending = pending[1:]
			}
		}
	}
	for _, tok := range pending {
		waitToken(t, tok)
	}
}

// runSimulation runs `cairn sim` for n devices against the broker at
// mqtt for d, and fails the test unless every device's messages were
// acknowledged.
func runSimulation(t *testing.T, bin, mqtt string, n int, d time.Duration) {
	t.Helper()
	sim := startProcess(t, bin, "sim", "-broker", "tcp://"+mqtt, "-devices", strconv.Itoa(n),
		"-rate", strconv.Itoa(10*n), "-duration", d.String(), "-client-id", "dashboard-sim")
	select {
	case <-sim.Exited():
	case <-time.After(d + startTimeout):
		t.Fatalf("cairn sim still running after %s; output:\n%s", d+startTimeout, sim.out)
	}
	if err := sim.Err(); err != nil {
		t.Fatalf("cairn sim: %v\n%s", err, sim.out)
	}
	var sum simSummary
	lines := strings.Split(strings.TrimSpace(sim.out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		t.Fatalf("cairn sim's summary: %v\n%s", err, sim.out)
	}
	if sum.Acked < int64(n) || sum.Acked != sum.Sent {
		t.Fatalf("cairn sim: %d messages sent, %d acknowledged; want at least %d, all acknowledged", sum.Sent, sum.Acked, n)
	}
}

// checkDeviceList waits until the device list names every device.
func checkDeviceList(t *testing.T, b *browser, devices []string) {
	t.Helper()
	list := `[...document.querySelectorAll('[data-part="devices"] tbody tr > :first-child')].map(e => e.textContent.trim())`
	waitJS(t, b, startTimeout, "every device in the list",
		fmt.Sprintf(`(l => %s.every(d => l.includes(d)))(%s)`, jsArray(devices), list),
		list+`.join(" ")`)
}

// checkCharts checks that the charts part has one figure per metric,
// captioned "device: metric", each with an SVG chart.
func checkCharts(t *testing.T, b *browser, metrics []string) {
	t.Helper()
	type figure struct {
		Caption string `json:"caption"`
		SVGs    int    `json:"svgs"`
	}
	figs := eval[[]figure](t, b, `[...document.querySelectorAll('[data-part="charts"] figure')].map(f => ({
		caption: (f.querySelector("figcaption") || {textContent: ""}).textContent.trim(),
		svgs: f.querySelectorAll("svg").length}))`)
	var names []string
	for _, f := range figs {
		// "sim-0003: temperature (°C)"
		_, rest, _ := strings.Cut(f.Caption, ": ")
		names = append(names, strings.Fields(rest + " ?")[0])
		if f.SVGs != 1 {
			t.Errorf("chart %q: %d svg elements, want 1", f.Caption, f.SVGs)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, metrics) {
		t.Errorf("charts of %v, want one each of %v", names, metrics)
	}
}

// rangeSpans are the ranges of the buttons, in the order they are tried,
// and how each chart's <desc> names its span.
var rangeSpans = []struct{ value, span string }{
	{"1h", "the 1 hour from"},
	{"7d", "the 7 days from"},
	{"90d", "the 90 days from"},
	{"24h", "the 24 hours from"},
}

// checkRanges clicks each range button and checks that the charts are
// drawn again over its span, that the markup differs from every other
// range's, and that aria-pressed marks the button clicked alone.
func checkRanges(t *testing.T, b *browser) {
	t.Helper()
	const svgs = `[...document.querySelectorAll('[data-part="charts"] svg')]`
	const pressed = `[...document.querySelectorAll("form.ranges button")].map(e => e.value + "=" + e.getAttribute("aria-pressed")).join(" ")`
	markup := map[string]string{}
	for _, r := range rangeSpans {
		b.do(t, "press "+r.value, chromedp.Click(chromedp.CSS(`form.ranges button[value="`+r.value+`"]`)))
		waitJS(t, b, startTimeout, "the charts of "+r.value,
			fmt.Sprintf(`%s.length > 0 && %s.every(s => s.querySelector("desc").textContent.includes(%q))`, svgs, svgs, r.span),
			svgs+`.map(s => s.querySelector("desc").textContent).join(" | ")`)
		got := eval[string](t, b, pressed)
		var want []string
		for _, o := range rangeSpans {
			want = append(want, fmt.Sprintf("%s=%t", o.value, o.value == r.value))
		}
		slices.Sort(want)
		gotSorted := strings.Fields(got)
		slices.Sort(gotSorted)
		if !slices.Equal(gotSorted, want) {
			t.Errorf("after pressing %s: aria-pressed %s, want %s", r.value, got, strings.Join(want, " "))
		}
		markup[r.value] = eval[string](t, b, svgs+`.map(s => s.outerHTML).join("\n")`)
		for other, m := range markup {
			if other != r.value && m == markup[r.value] {
				t.Errorf("the charts of %s and of %s are the same SVG", other, r.value)
			}
		}
	}
}

// checkOvertaken delays the answers to the 7d charts, presses 7d and at
// once 1h, and checks that the 7d charts, coming last, do not replace the
// 1h ones that the pressed button names.
func checkOvertaken(t *testing.T, b *browser) {
	t.Helper()
	const svgs = `[...document.querySelectorAll('[data-part="charts"] svg')]`
	const descs = svgs + `.map(s => s.querySelector("desc").textContent).join(" | ")`
	const delay = 2 * time.Second
	eval[bool](t, b, fmt.Sprintf(`(() => {
		const fetch0 = window.fetch;
		window.cairnTestFetch = fetch0;
		window.cairnTestSlow = 0;
		window.fetch = (url, opts) => {
			const answer = fetch0(url, opts);
			if (!String(url).includes("part=charts") || !String(url).includes("range=7d")) return answer;
			window.cairnTestSlow++;
			return answer.then(r => new Promise(done => setTimeout(() => { window.cairnTestSlow--; done(r); }, %d)));
		};
		return true;
	})()`, delay.Milliseconds()))
	defer eval[bool](t, b, `window.fetch = window.cairnTestFetch, true`)
	b.do(t, "press 7d, then 1h", chromedp.Click(chromedp.CSS(`form.ranges button[value="7d"]`)),
		chromedp.Click(chromedp.CSS(`form.ranges button[value="1h"]`)))
	if n := eval[int](t, b, `window.cairnTestSlow`); n != 1 {
		t.Fatalf("%d answers to the 7d charts held back, want 1 (the test's delay did not take)", n)
	}
	waitJS(t, b, startTimeout, "the 1h charts", svgs+`.length > 0 && `+svgs+`.every(s => s.querySelector("desc").textContent.includes("the 1 hour from"))`, descs)
	waitJS(t, b, delay+5*time.Second, "the held-back 7d answer", `window.cairnTestSlow === 0`, `String(window.cairnTestSlow)`)
	// Give a late answer the time to be written into the page.
	time.Sleep(200 * time.Millisecond)
	if got := eval[string](t, b, descs); strings.Contains(got, "the 7 days from") || !strings.Contains(got, "the 1 hour from") {
		t.Errorf("after pressing 7d and then 1h, with the 7d answer coming last, the charts are %s; want the 1h charts", got)
	}
	if got := eval[string](t, b, `document.querySelector('form.ranges button[aria-pressed="true"]').value`); got != "1h" {
		t.Errorf("the pressed range button is %s, want 1h", got)
	}
}

// checkLiveReading publishes a reading of a value no other has to device
// and waits for the device list to show it, within the page's refresh
// interval and some slack.
func checkLiveReading(t *testing.T, b *browser, pub paho.Client, device string) {
	t.Helper()
	refresh := eval[string](t, b, `document.body.dataset.refresh`)
	secs, err := strconv.ParseFloat(refresh, 64)
	if err != nil || secs <= 0 {
		t.Fatalf("the page's refresh interval is %q, want a number of seconds > 0", refresh)
	}
	// Keep the focus out of the parts: a part with the focus is not
	// reloaded.
	eval[bool](t, b, `document.activeElement.blur(), true`)
	payload := fmt.Sprintf(`{"ts":%d,"temperature":1234.5}`, time.Now().UnixMilli())
	if err := publish1(pub, "sensors/"+device+"/telemetry", payload); err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`[...document.querySelectorAll('[data-part="devices"] tbody tr')].find(r => r.firstElementChild.textContent.trim() === %q)`, device)
	within := time.Duration(secs*float64(time.Second)) + 5*time.Second
	begin := time.Now()
	waitJS(t, b, within, "the new reading of "+device+" in the list",
		fmt.Sprintf(`(r => !!r && r.textContent.includes("temperature 1234.5"))(%s)`, row),
		fmt.Sprintf(`(r => r ? r.textContent : "no row")(%s)`, row))
	t.Logf("the new reading showed after %s (refresh every %ss)", time.Since(begin).Round(10*time.Millisecond), refresh)
}

// checkKeyboard presses Tab until the focus comes round again, and checks
// that it reached every control of the page and that each showed that it
// had the focus.
func checkKeyboard(t *testing.T, b *browser) {
	t.Helper()
	// describe names an element the same way across the reloads of the
	// parts, which replace the elements.
	const describe = `e => e.tagName.toLowerCase() + "|" + (e.getAttribute("href") || "") + "|" + (e.name || "") + "|" + (e.value || "") + "|" + e.textContent.trim().slice(0, 40)`
	controls := eval[[]string](t, b, `[...document.querySelectorAll('a[href],button,input,select,textarea,[tabindex]')]
		.filter(e => !e.disabled && e.type !== "hidden" && e.tabIndex >= 0 && e.getClientRects().length > 0)
		.map(`+describe+`)`)
	if len(controls) == 0 {
		t.Fatal("the page has no control")
	}
	eval[bool](t, b, `document.activeElement.blur(), window.scrollTo(0, 0), true`)
	type focused struct {
		Control string `json:"control"`
		Outline string `json:"outline"`
		Shadow  string `json:"shadow"`
	}
	reached := map[string]focused{}
	var order []string
	for i := 0; i < 2*len(controls)+10; i++ {
		b.do(t, "press Tab", chromedp.KeyEvent(kb.Tab))
		f := eval[focused](t, b, `(e => e === document.body || !e ? {control: ""} : (s => ({control: (`+describe+`)(e),
			outline: s.outlineStyle === "none" || parseFloat(s.outlineWidth) === 0 ? "" : s.outlineStyle + " " + s.outlineWidth + " " + s.outlineColor,
			shadow: s.boxShadow === "none" ? "" : s.boxShadow}))(getComputedStyle(e)))(document.activeElement)`)
		if f.Control == "" {
			continue // the focus left the page for the browser's own controls
		}
		if len(order) > 0 && f.Control == order[0] {
			break
		}
		order = append(order, f.Control)
		reached[f.Control] = f
	}
	for _, c := range controls {
		f, ok := reached[c]
		switch {
		case !ok:
			t.Errorf("Tab never reached %s (reached, in order: %s)", c, strings.Join(order, ", "))
		case f.Outline == "" && f.Shadow == "":
			t.Errorf("%s shows no focus: no outline, no box-shadow", c)
		}
	}
	t.Logf("Tab reached %d controls of %d", len(reached), len(controls))
}

// screenshot writes a PNG of the whole page, 1280 pixels wide, to path,
// relative to the repository's root unless absolute.
func screenshot(t *testing.T, b *browser, path string) {
	t.Helper()
	if !filepath.IsAbs(path) {
		path = filepath.Join("..", "..", path)
	}
	eval[bool](t, b, `document.activeElement.blur(), window.scrollTo(0, 0), true`)
	ctx, cancel := context.WithTimeout(b.ctx, startTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// jsArray is strs as a JavaScript array literal.
func jsArray(strs []string) string {
	js, err := json.Marshal(strs)
	if err != nil {
		panic(err) // strings always marshal
	}
	return string(js)
}

// TestDashboard_Login: with http.token_file the page asks for the token;
// a wrong one is refused, the right one leads to the page, and the
// session is kept in a cookie the page's scripts cannot read.
func TestDashboard_Login(t *testing.T) {
	token := writeFile(t, t.TempDir(), "token", []byte("s3cret-token-0123\n"), 0o600)
	c := startCairn(t, cairnBinary.get(t), writeConfig(t, t.TempDir(), dashboardConfig()+"  token_file: "+token+"\n"))
	b := startBrowser(t)
	// The page without a session, and the wrong token, are answered 401.
	b.allow(func(status int64) bool { return status == 401 })
	b.do(t, "open the page", chromedp.Navigate("http://"+c.http+"/"))
	login := func(tok string) {
		t.Helper()
		b.do(t, "sign in with "+tok, chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), tok),
			chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := chromedp.WaitEvent(page.LoadEventFired, nil,
					chromedp.Click(chromedp.CSS(`form button[type="submit"]`)))(ctx, tg)
				return err
			}))
	}
	if n := eval[int](t, b, `document.querySelectorAll('form[method="post"] input[name="token"]').length`); n != 1 {
		t.Fatalf("the page without a session: %d token fields, want a login form", n)
	}
	if n := eval[int](t, b, `document.querySelectorAll("[data-part]").length`); n != 0 {
		t.Errorf("the page without a session shows %d parts of the dashboard, want none", n)
	}
	login("wrong-token")
	if n := eval[int](t, b, `document.querySelectorAll('input[name="token"]').length`); n != 1 {
		t.Fatalf("after a wrong token: %d token fields, want the login form again; page: %s", n, eval[string](t, b, `document.body.innerText`))
	}
	if msg := eval[string](t, b, `(e => e ? e.textContent.trim() : "")(document.querySelector('[role="alert"]'))`); msg == "" {
		t.Error("after a wrong token: no message says so (role=alert)")
	}
	if cookies := sessionCookies(t, b); len(cookies) != 0 {
		t.Errorf("after a wrong token: cookies %v, want none", cookies)
	}
	login("s3cret-token-0123")
	if n := eval[int](t, b, `document.querySelectorAll('[data-part="devices"]').length`); n != 1 {
		t.Fatalf("after the right token: no dashboard; page: %s", eval[string](t, b, `document.body.innerText`))
	}
	if got := eval[string](t, b, `location.pathname`); got != "/" {
		t.Errorf("after the right token the page is %s, want /", got)
	}
	cookies := sessionCookies(t, b)
	if len(cookies) != 1 || !cookies[0].HTTPOnly || cookies[0].Value == "s3cret-token-0123" {
		t.Errorf("after the right token: cookies %+v, want one HttpOnly %s that is not the token", cookies, "cairn_session")
	}
	if got := eval[string](t, b, `document.cookie`); got != "" {
		t.Errorf("the page's scripts read the cookies %q", got)
	}
	b.allow(nil)
	b.do(t, "reload the page", chromedp.Reload())
	if n := eval[int](t, b, `document.querySelectorAll('[data-part="devices"]').length`); n != 1 {
		t.Errorf("the page reloaded with the session cookie: no dashboard; page: %s", eval[string](t, b, `document.body.innerText`))
	}
	b.checkProblems(t, "signing in")
}

// sessionCookies returns the browser's cookies named cairn_session.
func sessionCookies(t *testing.T, b *browser) []*network.Cookie {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, startTimeout)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatalf("cookies: %v", err)
	}
	var out []*network.Cookie
	for _, c := range res.Cookies {
		if c.Name == "cairn_session" {
			out = append(out, c)
		}
	}
	return out
}
