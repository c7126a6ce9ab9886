package gateway

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"github.com/cairn-gateway/cairn/buffer/encoding"
)

// Access is what an ACL rule grants on the topics of its filter.
type Access uint8

// Accesses. ReadWrite is Read|Write.
const (
	Read Access = 1 << iota
	Write
	ReadWrite = Read | Write
)

// PlaceholderUsername in an ACL filter stands for the client's user name.
const PlaceholderUsername = "{username}"

// MaxTopicLevels is the most levels a topic or filter may have; deeper ones
// are refused, for every client. mochi's topic tree holds a node per level
// of every subscription and retained message.
const MaxTopicLevels = 32

// ACLRule grants access to the topics that match Filter, an MQTT topic
// filter in which a whole level may be {username}.
type ACLRule struct {
	Access Access
	Filter string
}

// ACL holds the rules of an ACL file: rules for every user, and rules for
// one user each. It is immutable once parsed.
type ACL struct {
	All    []ACLRule
	ByUser map[string][]ACLRule
}

// ParseACL reads an ACL file. Each line is empty, a comment (#…), a rule
// "read FILTER", "write FILTER" or "readwrite FILTER", or "user NAME",
// after which the rules apply to that user only; rules before the first
// "user" line apply to everyone. Errors name the line.
func ParseACL(data []byte) (*ACL, error) {
	acl := &ACL{ByUser: make(map[string][]ACLRule)}
	user := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"read|write|readwrite FILTER\" or \"user NAME\" (got %q)", n, line)
		}
		var a Access
		switch fields[0] {
		case "user":
			if !ValidAccount(fields[1]) {
				return nil, fmt.Errorf("line %d: user %q: not a valid user name (1-%d bytes of A-Z a-z 0-9 _ . : -)", n, fields[1], encoding.MaxDeviceLen)
			}
			user = fields[1]
			if _, ok := acl.ByUser[user]; !ok {
				acl.ByUser[user] = nil
			}
			continue
		case "read":
			a = Read
		case "write":
			a = Write
		case "readwrite":
			a = ReadWrite
		default:
			return nil, fmt.Errorf("line %d: unknown keyword %q (want read, write, readwrite or user)", n, fields[0])
		}
		if err := checkACLFilter(fields[1]); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		r := ACLRule{Access: a, Filter: fields[1]}
		if user == "" {
			acl.All = append(acl.All, r)
		} else {
			acl.ByUser[user] = append(acl.ByUser[user], r)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return acl, nil
}

// checkACLFilter reports what is wrong with an ACL rule's filter.
func checkACLFilter(f string) error {
	levels := strings.Split(f, "/")
	if len(levels) > MaxTopicLevels {
		return fmt.Errorf("filter %q: more than %d levels", f, MaxTopicLevels)
	}
	for i, l := range levels {
		switch {
		case l == "#" && i != len(levels)-1:
			return fmt.Errorf("filter %q: \"#\" must be the last level", f)
		case l == "+" || l == "#" || l == PlaceholderUsername:
		case strings.ContainsAny(l, "+#{}"):
			return fmt.Errorf("filter %q: level %q: wildcards and {username} must be a whole level", f, l)
		}
	}
	return nil
}

// userRules are the filters one user may read and write, with {username}
// replaced, under one policy. Safe for concurrent use once built.
type userRules struct {
	gen         *policy  // the policy they were compiled from
	read, write []string // the default rules' and the ACL file's
	granted     []string // the ACL file's write rules only
}

// rulesFor compiles the rules of user: the default ones and the ACL file's.
func rulesFor(user string, defaults []ACLRule, acl *ACL) *userRules {
	u := new(userRules)
	add := func(rules []ACLRule, file bool) {
		for _, r := range rules {
			f := replaceUsername(r.Filter, user)
			if r.Access&Read != 0 {
				u.read = append(u.read, f)
			}
			if r.Access&Write != 0 {
				u.write = append(u.write, f)
				if file {
					u.granted = append(u.granted, f)
				}
			}
		}
	}
	add(defaults, false)
	if acl != nil {
		add(acl.All, true)
		add(acl.ByUser[user], true)
	}
	return u
}

// rulesOf compiles the rules of user under p.
func rulesOf(user string, p *policy) *userRules {
	u := rulesFor(user, p.defaults, p.acl)
	u.gen = p
	return u
}

// writeReason returns why user may not publish to topic under the policy
// u was compiled from, or "" if it may. A topic that a route will decode
// is judged for that route, the first that matches: the user may write it
// if the route is a user's own and its device is the user's name, or if
// an ACL file rule covers the topic. Any other topic may be written where
// a rule covers it.
func (u *userRules) writeReason(user, topic string) string {
	p := u.gen
	i, device, _ := matchRoute(p.routes, topic)
	switch {
	case i < 0 && u.canWrite(topic):
		return ""
	case i < 0:
		return RefusePublish
	case p.own[i] && device == user:
		return ""
	case covers(u.granted, topic):
		return ""
	case p.routes[i].Pattern.HasDevice() && device != user:
		return RefuseOtherDevice
	}
	return RefusePublish
}

// replaceUsername replaces every whole {username} level of filter.
func replaceUsername(filter, user string) string {
	levels := strings.Split(filter, "/")
	for i, l := range levels {
		if l == PlaceholderUsername {
			levels[i] = user
		}
	}
	return strings.Join(levels, "/")
}

// canWrite reports whether a rule lets the user publish to topic.
func (u *userRules) canWrite(topic string) bool { return covers(u.write, topic) }

// covers reports whether one of filters covers topic.
func covers(filters []string, topic string) bool {
	for _, f := range filters {
		if filterCovers(f, topic) {
			return true
		}
	}
	return false
}

// canRead reports whether the user may subscribe to filter (or receive a
// message on a topic): every topic it matches must match a read rule.
func (u *userRules) canRead(filter string) bool {
	for _, f := range u.read {
		if filterCovers(f, filter) {
			return true
		}
	}
	return false
}

// filterCovers reports whether every topic that filter sub matches is
// matched by filter f. With a topic name as sub it is MQTT matching.
// Neither string is allocated or split.
func filterCovers(f, sub string) bool {
	if len(sub) > 0 && sub[0] == '$' && len(f) > 0 && (f[0] == '+' || f[0] == '#') {
		return false // wildcards do not match $SYS and the like
	}
	for {
		fl, frest, fmore := cutLevel(f)
		if fl == "#" {
			return true
		}
		sl, srest, smore := cutLevel(sub)
		switch {
		case sl == "#":
			return false // f has no "#" here
		case fl == "+":
		case fl != sl || sl == "+":
			return false
		}
		if !fmore || !smore {
			if !fmore && !smore {
				return true
			}
			// "a/#" also matches "a".
			return fmore && frest == "#"
		}
		f, sub = frest, srest
	}
}

func cutLevel(s string) (level, rest string, more bool) {
	if i := strings.IndexByte(s, '/'); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// topicLevels returns the number of levels of a topic or filter.
func topicLevels(s string) int { return strings.Count(s, "/") + 1 }

// AccountChars is the set of bytes allowed in an account name: an MQTT
// user name or certificate name, which the ACL maps to the one device it
// may publish as ([A-Za-z0-9_.:-]).
const AccountChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-"

// ValidAccount reports whether s is a valid account name: 1 to
// encoding.MaxDeviceLen bytes from AccountChars, and not "." or "..". Accounts are
// stricter than device ids because the password and ACL files separate
// their fields with spaces and colons.
func ValidAccount(s string) bool {
	if s == "" || len(s) > encoding.MaxDeviceLen || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAccountChar(s[i]) {
			return false
		}
	}
	return true
}

func isAccountChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '.' || c == ':' || c == '-'
}
