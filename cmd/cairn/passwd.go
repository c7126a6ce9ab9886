package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cairn-gateway/cairn/buffer/encoding"
	"github.com/cairn-gateway/cairn/gateway"
)

// runPasswd adds a user to a password file of the embedded broker, or
// changes its password: cairn passwd -file FILE USER. The password is
// asked for twice when stdin is a terminal, else read from stdin's first
// line. The file is replaced whole, keeping its owner and mode; a new one
// is given to the service's group to read (passwordFileOwner).
func runPasswd(args []string, stdin *os.File, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("passwd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("file", "", "password `file` (mqtt.embedded.password_file); created if missing")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cairn passwd -file FILE USER\n\nAdds USER to FILE or changes its password (bcrypt). The password is\nasked for on a terminal, or read from the first line of stdin.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || fs.NArg() != 1 {
		fs.Usage()
		return flag.ErrHelp
	}
	user := fs.Arg(0)
	if !gateway.ValidAccount(user) {
		return fmt.Errorf("passwd: user %q: not a valid user name (1-%d bytes of A-Z a-z 0-9 _ . : -, like a device id)", user, encoding.MaxDeviceLen)
	}
	old, err := os.ReadFile(*file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("passwd: %w", err)
	}
	if _, err := gateway.ParsePasswords(old); err != nil {
		return fmt.Errorf("passwd: %s: %w", *file, err)
	}
	password, err := readNewPassword(stdin, stderr)
	if err != nil {
		return fmt.Errorf("passwd: %w", err)
	}
	hash, err := gateway.HashPassword(password)
	if err != nil {
		return fmt.Errorf("passwd: %w", err)
	}
	out, changed := setPasswordLine(old, user, hash)
	owner := passwordFileOwner(*file)
	if err := owner.write(*file, out); err != nil {
		return fmt.Errorf("passwd: %w", err)
	}
	if changed {
		fmt.Fprintf(stdout, "changed the password of %s in %s (%s)\n", user, *file, owner)
	} else {
		fmt.Fprintf(stdout, "added %s to %s (%s)\n", user, *file, owner)
	}
	return nil
}

// setPasswordLine returns the file with the user's line set to hash, and
// whether the user had a line already.
func setPasswordLine(data []byte, user, hash string) ([]byte, bool) {
	var out bytes.Buffer
	changed := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if u, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && u == user {
			line, changed = user+":"+hash, true
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	if !changed {
		out.WriteString(user + ":" + hash + "\n")
	}
	return out.Bytes(), changed
}

// readNewPassword asks for a password twice on a terminal, without echo,
// or reads the first line of a pipe or file.
func readNewPassword(stdin *os.File, stderr io.Writer) ([]byte, error) {
	fd := int(stdin.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil { // not a terminal
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		p := strings.TrimRight(line, "\r\n")
		if p == "" {
			return nil, errors.New("no password on stdin")
		}
		return []byte(p), nil
	}
	noEcho := *old
	noEcho.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &noEcho); err != nil {
		return nil, err
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, old) //nolint:errcheck // restoring; nothing better to do
	r := bufio.NewReader(stdin)
	ask := func(prompt string) (string, error) {
		fmt.Fprint(stderr, prompt)
		line, err := r.ReadString('\n')
		fmt.Fprintln(stderr)
		return strings.TrimRight(line, "\r\n"), err
	}
	p1, err := ask("password: ")
	if err != nil {
		return nil, err
	}
	p2, err := ask("again: ")
	if err != nil {
		return nil, err
	}
	if p1 != p2 {
		return nil, errors.New("the passwords differ")
	}
	if p1 == "" {
		return nil, errors.New("empty password")
	}
	return []byte(p1), nil
}
