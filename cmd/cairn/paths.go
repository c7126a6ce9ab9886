package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// resolvePaths makes every relative path of the configuration (data_dir,
// and the password, ACL, token, certificate and key files) absolute
// against dir, the folder of the configuration file, so that a file means
// the same whichever directory cairn starts in and every error names the
// path it tried. A secret named without a directory is first looked up
// in systemd's credentials (secretPath).
func (c *Config) resolvePaths(dir string) {
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	secret := func(p *string) {
		if s := secretPath(*p); s != *p {
			*p = s
			return
		}
		abs(p)
	}
	abs(&c.DataDir)
	if e := c.MQTT.Embedded; e != nil {
		secret(&e.PasswordFile)
		abs(&e.ACLFile)
		abs(&e.TLS.CertFile)
		secret(&e.TLS.KeyFile)
		abs(&e.TLS.ClientCAFile)
	}
	secret(&c.MQTT.PasswordFile)
	secret(&c.HTTP.TokenFile)
	tls := []*TLSConfig{&c.MQTT.TLS}
	for i := range c.Uplink {
		tls = append(tls, &c.Uplink[i].TLS)
		secret(&c.Uplink[i].Auth.TokenFile)
		secret(&c.Uplink[i].Auth.PasswordFile)
		secret(&c.Uplink[i].Azure.KeyFile)
	}
	for _, t := range tls {
		abs(&t.CAFile)
		abs(&t.CertFile)
		secret(&t.KeyFile)
	}
}

// checkDataDir reports whether cairn can create data_dir and write in it,
// as run will, leaving nothing behind: it makes and removes a file in the
// directory if it exists, else a directory in its nearest existing
// parent. A file system with no space left passes: the store waits for
// space (openStore).
func checkDataDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("data_dir: %s is not a directory", dir)
	case err == nil:
		f, err := os.CreateTemp(dir, ".cairn-check-*")
		if err != nil {
			return dataDirError(dir, "cannot write in", "create a file in "+dir, err)
		}
		return errors.Join(f.Close(), os.Remove(f.Name()))
	case !errors.Is(err, os.ErrNotExist):
		return dataDirError(dir, "cannot reach", "stat "+dir, err)
	}
	parent := filepath.Dir(dir)
	for parent != filepath.Dir(parent) {
		if _, err := os.Stat(parent); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		parent = filepath.Dir(parent)
	}
	if fi, err := os.Stat(parent); err != nil {
		return dataDirError(dir, "cannot create", "stat "+parent, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("data_dir: cannot create %s: %s is not a directory", dir, parent)
	}
	tmp, err := os.MkdirTemp(parent, ".cairn-check-*")
	if err != nil {
		return dataDirError(dir, "cannot create", "make a directory in "+parent, err)
	}
	return os.Remove(tmp)
}

// dataDirError is checkDataDir's error: what it cannot do to dir, the
// step that failed, and why (the reason alone, without the name of its
// probe).
func dataDirError(dir, what, step string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return nil
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("data_dir: %s %s: %s: %w", what, dir, step, err)
}

// loadStartable loads the configuration at path (LoadConfig) and checks
// what run needs of the machine beyond the file itself: that the data
// directory can be made and written. run and check-config start here.
func loadStartable(path string) (*Config, error) {
	cfg, err := LoadConfig(path)
	if err != nil {
		return nil, err
	}
	if err := checkDataDir(cfg.DataDir); err != nil {
		return nil, &configError{fmt.Errorf("%s: %w", path, err)}
	}
	return cfg, nil
}

// inConfigFile puts the configuration file's name before a configuration
// error of the daemon's start (an address that cannot be bound), which
// names the key and the reason; other errors pass as they are.
func inConfigFile(path string, err error) error {
	var ce *configError
	if !errors.As(err, &ce) {
		return err
	}
	return &configError{fmt.Errorf("%s: %w", path, err)}
}

// bindError makes a listener's error a configuration error when the
// system refused the address (in use, not this host's, a privileged port):
// the key's value must change, and restarting will not help.
func bindError(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		return &configError{err}
	}
	return err
}

// keyPairError names the certificate and key files in an error of
// tls.LoadX509KeyPair that does not name one already (a file that holds
// no PEM block, a key that does not match).
func keyPairError(cert, key string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("%s and %s: %w", cert, key, err)
}

// storeError makes a store that cannot open for want of permission (its
// files belong to another user, say root after a first run by hand) a
// configuration error: restarting will not help.
func storeError(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return &configError{fmt.Errorf("data_dir: %w", err)}
	}
	return err
}
