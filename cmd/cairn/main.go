// Command cairn is an edge gateway for IoT sensors: it takes readings in
// over MQTT, keeps them safely on local disk, and reports on them over HTTP.
//
//	cairn run -config FILE            run the daemon
//	cairn check-config -config FILE   validate a configuration file
//	cairn status [-url ADDR]          show how a running gateway is doing
//	cairn sim [flags]                 simulate sensors publishing readings
//	cairn passwd -file FILE USER      add a broker user or change its password
//	cairn version                     print version information
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	_ "time/tzdata" // time_zone works on a system without zoneinfo

	badgerrelease "github.com/cairn-gateway/cairn/third_party/badger/release"
)

// Set at build time with -ldflags "-X main.version=… -X main.commit=… -X main.date=…".
var (
	version = "dev"
	commit  = "unknown"
	date    = "unknown"
)

// exitConfig is EX_CONFIG: the unit's RestartPreventExitStatus.
const exitConfig = 78

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "cairn:", err)
	var ce *configError
	if errors.As(err, &ce) {
		os.Exit(exitConfig)
	}
	if errors.Is(err, errWordSize) {
		os.Exit(exitUnsupported)
	}
	os.Exit(1)
}

const usage = `usage: cairn <command> [flags]

commands:
  run -config FILE            run the gateway
  check-config -config FILE   check a configuration file and exit
  status [-url ADDR]          show how a running cairn is doing (cairn status -h)
  sim [flags]                 publish simulated sensor readings (cairn sim -h)
  passwd -file FILE USER      add a user of the embedded broker or change its password
  version                     print version information
`

// run runs the subcommand named by args[0]. Signals reach the daemon through
// its own handler; ctx ending stops it too (tests use that).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "run":
		if err := checkWordSize(); err != nil {
			return err
		}
		path, err := configFlag("run", args, stderr)
		if err != nil {
			return err
		}
		// From here on a SIGHUP reloads the file; it must not kill a
		// daemon that is still opening its store.
		hups := hangups(ctx)
		cfg, err := loadStartable(path)
		if err != nil {
			return err
		}
		return inConfigFile(path, runDaemon(ctx, cfg, stderr, signals(ctx), reloadFrom(path, hups)))
	case "check-config":
		path, err := configFlag("check-config", args, stderr)
		if err != nil {
			return err
		}
		cfg, err := loadStartable(path)
		if err != nil {
			return err
		}
		for _, w := range cfg.Warnings() {
			fmt.Fprintf(stderr, "%s: warning: %s\n", path, w)
		}
		fmt.Fprintf(stdout, "%s: ok (%s)\n", path, describe(cfg))
		return nil
	case "sim":
		return runSim(ctx, args, stdout, stderr)
	case "status":
		return runStatus(args, stdout, stderr)
	case "passwd":
		return runPasswd(args, os.Stdin, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintf(stdout, "cairn %s (commit %s, built %s, %s %s/%s)\n",
			version, commit, date, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		// The build info does not list Badger: its copy is cairn's code.
		fmt.Fprintf(stdout, "badger %s %s plus %d patches (third_party/badger)\n",
			badgerrelease.Module, badgerrelease.Version, badgerrelease.Patches)
		return nil
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}

func configFlag(name string, args []string, stderr io.Writer) (string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "/etc/cairn/cairn.yaml", "configuration `file`")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "", fmt.Errorf("%s: unexpected argument %q", name, fs.Arg(0))
	}
	return *path, nil
}

// describe summarises a valid configuration in one line.
func describe(c *Config) string {
	mqtt := "embedded broker on " + c.MQTT.Embedded.listenOrEmpty()
	if c.MQTT.URL != "" {
		mqtt = "external broker " + c.MQTT.URL
	}
	up := "no uplink"
	for i, u := range c.Uplink {
		if i == 0 {
			up = "uplink "
		} else {
			up += ", "
		}
		if u.key != "uplink" { // a list names its upstreams
			up += u.Name + " "
		}
		up += fmt.Sprintf("%s to %s as %s", u.kind(), u.URL, u.GatewayID)
	}
	return fmt.Sprintf("data in %s, %s, %d topic pattern(s), http on %s, %s",
		c.DataDir, mqtt, len(c.MQTT.Topics), c.HTTP.Listen, up)
}

// listenOrEmpty names the embedded broker's listeners, "" if there is
// no embedded broker.
func (e *EmbeddedConfig) listenOrEmpty() string {
	switch {
	case e == nil:
		return ""
	case e.TLSListen == "":
		return e.Listen
	case e.Listen == "":
		return e.TLSListen + " (TLS)"
	}
	return e.Listen + " and " + e.TLSListen + " (TLS)"
}

// signals delivers SIGINT and SIGTERM until ctx ends.
func signals(ctx context.Context) <-chan os.Signal {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		signal.Stop(ch)
	}()
	return ch
}
