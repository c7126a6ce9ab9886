
(function () {
  "use strict";
  var body = document.body, every = +body.dataset.refresh, tz = "";
  try { tz = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) {}
  
  function local(root) {
    root.querySelectorAll("[data-t]").forEach(function (e) {
      var d = new Date(+e.dataset.t), f = e.dataset.f;
      if (f === "a") { e.title = d.toLocaleString(); return; }
      e.textContent = f === "d" || (d.getHours() === 0 && d.getMinutes() === 0)
        ? d.toLocaleDateString([], {month: "short", day: "numeric"})
        : d.toLocaleTimeString([], {hour: "2-digit", minute: "2-digit"});
    });
  }
  
  
  
  
  var asked = {};
  function load(part, force) {
    var el = document.querySelector('[data-part="' + part + '"]');
    if (!el || (!force && (document.hidden || el.contains(document.activeElement)))) return;
    var q = new URLSearchParams({part: part, device: body.dataset.device, range: body.dataset.range});
    if (body.dataset.filter) q.set("filter", body.dataset.filter);
    if (body.dataset.page) q.set("page", body.dataset.page);
    if (tz) q.set("tz", tz);
    var n = asked[part] = (asked[part] || 0) + 1;
    fetch(location.pathname + "?" + q, {credentials: "same-origin"}).then(function (r) {
      if (n !== asked[part]) return;
      if (r.status === 401) { location.reload(); return; }
      if (r.ok) return r.text().then(function (h) { if (n === asked[part]) { el.innerHTML = h; local(el); } });
    }).catch(function () {});
  }
  local(document);
  var form = document.querySelector("form.ranges");
  if (form) form.addEventListener("submit", function (ev) {
    var v = ev.submitter && ev.submitter.value;
    if (!v) return;
    ev.preventDefault();
    body.dataset.range = v;
    form.querySelectorAll("button").forEach(function (b) { b.setAttribute("aria-pressed", b.value === v); });
    var q = new URLSearchParams({device: body.dataset.device, range: v});
    if (body.dataset.filter) q.set("filter", body.dataset.filter);
    if (body.dataset.page) q.set("page", body.dataset.page);
    history.replaceState(null, "", "?" + q + "#charts");
    load("charts", true);
  });
  var charts = document.querySelector('[data-part="charts"]');
  if (tz && charts && charts.dataset.tz !== tz) load("charts", true);
  if (every > 0) setInterval(function () { ["health", "devices", "charts"].forEach(function (p) { load(p); }); }, every * 1000);
})();
