package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// defaultStatusURL is where cairn status looks without -url or -config:
// the default http.listen.
const defaultStatusURL = "http://127.0.0.1:8080"

// statusTarget is where cairn status asks, and with which token.
type statusTarget struct {
	base  string // http://host:port, or the URL given
	token []byte // nil: none
	// tokenFrom names where the token came from, for an error; "" for
	// none.
	tokenFrom string
}

// findStatusTarget works out where cairn status asks and with which token,
// from its flags. The configuration, when given, is decoded and checked
// but its files are not read, but for http.token_file when no token is
// given: status needs none of the broker's secrets.
func findStatusTarget(config, url, token, tokenFile string) (statusTarget, error) {
	var st statusTarget
	if token != "" && tokenFile != "" {
		return st, errors.New("status: give -token or -token-file, not both")
	}
	var cfg *Config
	if config != "" {
		var err error
		if cfg, err = readConfigFile(config); err != nil {
			return st, err
		}
	}
	switch {
	case url != "":
		st.base = url
		if !strings.Contains(url, "://") {
			st.base = "http://" + url
		}
	case cfg != nil:
		host, port, _ := net.SplitHostPort(cfg.HTTP.Listen) // validated
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		st.base = "http://" + net.JoinHostPort(host, port)
	default:
		st.base = defaultStatusURL
	}
	switch {
	case token != "":
		st.token, st.tokenFrom = []byte(strings.TrimSpace(token)), "-token"
	case tokenFile != "":
		t, err := readSecret(tokenFile)
		if err != nil {
			return st, fmt.Errorf("status: -token-file: %w", err)
		}
		st.token, st.tokenFrom = t, "-token-file "+tokenFile
	case cfg != nil && cfg.HTTP.TokenFile != "":
		t, err := readSecret(cfg.HTTP.TokenFile)
		if err != nil {
			return st, &configError{fmt.Errorf("%s: http.token_file: %w", config, err)}
		}
		st.token, st.tokenFrom = t, "http.token_file of "+config
	}
	return st, nil
}

// unauthorized explains a 401.
func (st statusTarget) unauthorized() string {
	if st.tokenFrom == "" {
		return "the gateway has http.token_file set: give its token with -token-file FILE (or -config with that file)"
	}
	return "the token from " + st.tokenFrom + " is not the gateway's"
}
