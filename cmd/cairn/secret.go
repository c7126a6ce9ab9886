package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// credentialsDirEnv is set by systemd for a unit with LoadCredential=: a
// secret file named without a directory is looked up there first.
const credentialsDirEnv = "CREDENTIALS_DIRECTORY"

// secretPath resolves the path of a secret file: a bare name (no slash) is
// taken from $CREDENTIALS_DIRECTORY when systemd set it and the file is
// there, so "token_file: uplink-token" works with LoadCredential=.
func secretPath(name string) string {
	if dir := os.Getenv(credentialsDirEnv); dir != "" && !strings.ContainsRune(name, '/') {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return name
}

// readSecret reads a password or token from a file, trimmed of surrounding
// white space. It refuses a file that its group or others may read (but a
// file of root's that its group may read: checkSecretMode), and an empty
// one: a secret that leaks or is missing should stop the start, not
// be found later.
func readSecret(name string) ([]byte, error) {
	p := secretPath(name)
	f, err := os.Open(p)
	if err != nil {
		return nil, explainSecretOpen(p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkSecretMode(p, fi); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(f); err != nil {
		return nil, err
	}
	s := bytes.TrimSpace(b.Bytes())
	if len(s) == 0 {
		return nil, fmt.Errorf("%s is empty", p)
	}
	return s, nil
}

// TLSConfig is a tls: block of a client: the CA that signs the server's
// certificate (the system's roots when empty) and an optional client
// certificate.
type TLSConfig struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name checked in the server's certificate.
	ServerName string `yaml:"server_name"`
	// ALPN are the protocol names offered (AWS IoT Core's MQTT on port
	// 443 wants x-amzn-mqtt-ca).
	ALPN ALPNList `yaml:"alpn"`
}

// ALPNList is tls.alpn: a list of protocol names in the file, kept
// joined by commas so that TLSConfig stays comparable (a reload compares
// configurations).
type ALPNList string

// UnmarshalYAML takes a list of names, or one name.
func (a *ALPNList) UnmarshalYAML(n *yaml.Node) error {
	var names []string
	if n.Kind == yaml.ScalarNode {
		names = []string{n.Value}
	} else if err := n.Decode(&names); err != nil {
		return err
	}
	for _, name := range names {
		if name == "" || strings.Contains(name, ",") || len(name) > 255 {
			return fmt.Errorf("line %d: tls.alpn: a protocol name is 1 to 255 bytes without a comma (got %q)", n.Line, name)
		}
	}
	*a = ALPNList(strings.Join(names, ","))
	return nil
}

// protocols returns the names, or nil.
func (a ALPNList) protocols() []string {
	if a == "" {
		return nil
	}
	return strings.Split(string(a), ",")
}

// validate reports what is wrong with the block; key is its config path.
func (t TLSConfig) validate(key string) error {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fmt.Errorf("%s: cert_file and key_file go together", key)
	}
	return nil
}

// clientConfig loads the files into a TLS 1.2+ client configuration.
func (t TLSConfig) clientConfig() (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, NextProtos: t.ALPN.protocols()}
	if t.CAFile != "" {
		pool, err := loadCAs(t.CAFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if t.CertFile != "" {
		if _, err := readSecret(t.KeyFile); err != nil { // the key is a secret: same checks
			return nil, err
		}
		cert, err := tls.LoadX509KeyPair(t.CertFile, secretPath(t.KeyFile))
		if err != nil {
			return nil, keyPairError(t.CertFile, secretPath(t.KeyFile), err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// loadCAs reads the PEM certificates of a CA file into a pool.
func loadCAs(name string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", name)
	}
	return pool, nil
}
