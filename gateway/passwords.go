package gateway

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"

	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// PasswordCost is the bcrypt cost of new password hashes: about 50 ms on a
// Raspberry Pi 4 core, paid once per user at each start of the broker (a
// checked password is remembered, see Passwords.Check).
const PasswordCost = 10

// HashPassword returns the bcrypt hash of a password, for a password file.
func HashPassword(password []byte) (string, error) {
	if len(password) == 0 {
		return "", errors.New("empty password")
	}
	if len(password) > 72 {
		return "", errors.New("password longer than 72 bytes (bcrypt's limit)")
	}
	h, err := bcrypt.GenerateFromPassword(password, PasswordCost)
	return string(h), err
}

// Passwords are the entries of a password file: user names and bcrypt
// hashes. It is safe for concurrent use.
type Passwords struct {
	hashes map[string][]byte
	// sem bounds the bcrypt comparisons that run at once: a flood of
	// CONNECTs with wrong passwords costs half the cores, not all.
	sem chan struct{}

	mu sync.Mutex // guards good
	// good holds, per user, the SHA-256 of the last password that matched
	// the hash: a sensor that reconnects is not checked with bcrypt again.
	good map[string][sha256.Size]byte
}

// ParsePasswords reads a password file: one "user:hash" line per user,
// where the hash is bcrypt's ($2a$, $2b$ or $2y$). Empty lines and lines
// starting with # are skipped. User names are device ids (1-64 bytes of
// A-Z a-z 0-9 _ . : -), so that the default ACL can compare them with a
// topic's {device} level. Errors name the line, never a hash.
func ParsePasswords(data []byte) (*Passwords, error) {
	p := &Passwords{
		hashes: make(map[string][]byte),
		sem:    make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)),
		good:   make(map[string][sha256.Size]byte),
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		switch {
		case !ok:
			return nil, fmt.Errorf("line %d: want user:hash", n)
		case !ValidAccount(user):
			return nil, fmt.Errorf("line %d: user %q: not a valid user name (1-%d bytes of A-Z a-z 0-9 _ . : -)", n, user, encoding.MaxDeviceLen)
		case p.hashes[user] != nil:
			return nil, fmt.Errorf("line %d: user %q appears twice", n, user)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return nil, fmt.Errorf("line %d: user %q: not a bcrypt hash (make one with cairn passwd)", n, user)
		}
		p.hashes[user] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// Len returns the number of users.
func (p *Passwords) Len() int { return len(p.hashes) }

// dummyHash is compared with when the user is unknown, so that an unknown
// user costs as much time as a wrong password.
const dummyHash = "$2a$10$H6.uVpzadF48aG52ZeMk3elVLUnRUK53vbH3oL5H/eDCddlj0SWWa"

// Check reports whether password is the user's, and whether the user is
// known at all.
func (p *Passwords) Check(user string, password []byte) (ok, known bool) {
	hash := p.hashes[user]
	if hash == nil {
		p.compare([]byte(dummyHash), password)
		return false, false
	}
	sum := sha256.Sum256(password)
	p.mu.Lock()
	last, seen := p.good[user]
	p.mu.Unlock()
	if seen && subtle.ConstantTimeCompare(last[:], sum[:]) == 1 {
		return true, true
	}
	if !p.compare(hash, password) {
		return false, true
	}
	p.mu.Lock()
	p.good[user] = sum
	p.mu.Unlock()
	return true, true
}

func (p *Passwords) compare(hash, password []byte) bool {
	p.sem <- struct{}{}
	defer func() { <-p.sem }()
	return bcrypt.CompareHashAndPassword(hash, password) == nil
}
