package gateway

import (
	"crypto/tls"
	"log/slog"
	"math"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	mqtt "github.com/cairn-gateway/cairn/third_party/mochi"
	"github.com/cairn-gateway/cairn/third_party/mochi/packets"
)

// Reasons the embedded broker refuses a connection, a message or a
// subscription, as counted in status.
const (
	RefuseNoCredentials  = "no_credentials"     // no user name where anonymous access is off
	RefuseUnknownUser    = "unknown_user"       // a user name not in the password file
	RefuseBadPassword    = "bad_password"       // a known user, a wrong password
	RefuseBadCertificate = "bad_certificate"    // TLS handshake failed (no, bad or expired client certificate, …)
	RefuseCertUser       = "cert_user_mismatch" // a user name that is not the certificate's common name
	RefuseOtherDevice    = "publish_other_device"
	RefusePublish        = "publish_not_allowed"
	RefuseSubscribe      = "subscribe_not_allowed"
	RefuseTopicTooDeep   = "topic_too_deep" // more than MaxTopicLevels levels
	RefuseMaxClients     = "max_clients"
	RefuseConnectTimeout = "connect_timeout" // no CONNECT within the time allowed
	RefuseMalformed      = "malformed_packet"
	RefusePacketTooLarge = "packet_too_large"
	RefuseInflight       = "inflight_exceeded"
	RefuseWriteBuffer    = "write_buffer_full" // a message to a slow subscriber dropped
	RefuseRateLimited    = "rate_limited"      // a message held back by the per-client rate limit
)

// A kind of refusal is logged once per client per refuseLogEvery; the
// memory of what was logged holds maxRefuseLogKeys entries at most.
const (
	refuseLogEvery   = time.Minute
	maxRefuseLogKeys = 4096
)

// Refusals counts refusals by reason and logs each kind of refusal at most
// once per client (or remote address) per minute. It is safe for
// concurrent use.
type Refusals struct {
	log *slog.Logger

	mu       sync.Mutex // guards byReason and lastLog
	byReason map[string]uint64
	lastLog  map[string]time.Time // by client + reason
}

// NewRefusals creates a Refusals that logs to log.
func NewRefusals(log *slog.Logger) *Refusals {
	return &Refusals{log: log, byReason: make(map[string]uint64), lastLog: make(map[string]time.Time)}
}

// add counts one refusal of a client (an id, or a remote address before the
// CONNECT) and logs it unless it was logged for that client in the last
// minute.
func (r *Refusals) add(reason, client string, attrs ...any) {
	now := time.Now()
	key := client + "\x00" + reason
	r.mu.Lock()
	r.byReason[reason]++
	last, seen := r.lastLog[key]
	logIt := !seen || now.Sub(last) >= refuseLogEvery
	if logIt {
		if len(r.lastLog) >= maxRefuseLogKeys { // a flood from many addresses: start over
			clear(r.lastLog)
		}
		r.lastLog[key] = now
	}
	r.mu.Unlock()
	if logIt {
		r.log.Warn("mqtt refused", append([]any{"reason", reason, "client", client}, attrs...)...)
	}
}

// Counts returns a copy of the counters by reason.
func (r *Refusals) Counts() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]uint64, len(r.byReason))
	for k, v := range r.byReason {
		m[k] = v
	}
	return m
}

// SortedReasons returns the reasons of m, sorted.
func SortedReasons(m map[string]uint64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// guardHook authenticates clients, applies the ACLs and the per-client
// message rate, and counts what it refuses. It is added before the ingest
// hook, so that a refused message is never ingested.
type guardHook struct {
	mqtt.HookBase
	passwords *Passwords // nil: no password file
	// policy is the routes and the ACL file's rules in effect; replaced
	// whole by Broker.SetRoutes.
	policy atomic.Pointer[policy]
	// anonymous lists the listeners on which a client without a user name
	// is let in, with full access.
	anonymous map[string]bool
	// certUser lists the listeners whose clients are known by their
	// certificate's common name.
	certUser map[string]bool
	rate     float64 // messages per second per client; 0: no limit
	refusals *Refusals

	clients sync.Map // *mqtt.Client → *clientGuard
}

// clientGuard is what the guard knows of one connected client.
type clientGuard struct {
	user    string
	trusted bool // anonymous where allowed: no ACL, no rate limit
	// rules are the client's rules under the policy they name; nil
	// until needed, and when trusted.
	rules atomic.Pointer[userRules]
	// lastWrite caches the verdict on the topic last published to: a
	// sensor publishes to the same topic again and again.
	lastWrite atomic.Pointer[verdict]
	// judged is the policy the client's latest PUBLISH was judged by.
	// The broker reads a client's packets one at a time, and asks the
	// ACL (OnACLCheck) before the hooks' OnPublish: the ingest hook
	// decodes the message by this policy's routes.
	judged atomic.Pointer[policy]
	// limit is the client's message rate limit (mqtt.embedded.limits.
	// message_rate), with a burst of one second's worth; nil when none.
	limit *rate.Limiter
}

type verdict struct {
	gen    *policy // the policy it was reached under
	topic  string
	reason string // "" when allowed
}

// rulesUnder returns the client's rules under p, compiling them when p
// is not the policy they were compiled from.
func (g *clientGuard) rulesUnder(p *policy) *userRules {
	if u := g.rules.Load(); u != nil && u.gen == p {
		return u
	}
	u := rulesOf(g.user, p)
	g.rules.Store(u)
	return u
}

func (h *guardHook) ID() string { return "cairn-guard" }

// Provides is called for every event: a switch, no allocation.
func (h *guardHook) Provides(b byte) bool {
	switch b {
	case mqtt.OnConnectAuthenticate, mqtt.OnACLCheck, mqtt.OnSubscribe,
		mqtt.OnPacketRead, mqtt.OnDisconnect, mqtt.OnPublishDropped:
		return true
	}
	return false
}

// OnConnectAuthenticate reports whether a client may connect: by its
// certificate, its user name and password, or anonymously where that is
// allowed.
func (h *guardHook) OnConnectAuthenticate(cl *mqtt.Client, pk packets.Packet) bool {
	user := string(pk.Connect.Username)
	// Before it is let in, a client is known by its address: client ids
	// and user names are the sender's to vary.
	who := remoteHost(cl.Net.Remote)
	g := &clientGuard{user: user}
	switch {
	case h.certUser[cl.Net.Listener]:
		cn := peerCommonName(cl.Net.Conn)
		if user != "" && user != cn {
			h.refusals.add(RefuseCertUser, who, "user", excerpt([]byte(user), 64), "cn", cn)
			return false
		}
		if !ValidAccount(cn) {
			h.refusals.add(RefuseBadCertificate, who, "cn", cn, "detail", "common name is not a valid user name")
			return false
		}
		g.user = cn
	case user == "" && len(pk.Connect.Password) == 0:
		if !h.anonymous[cl.Net.Listener] {
			h.refusals.add(RefuseNoCredentials, who)
			return false
		}
		g.trusted = true
	case h.passwords == nil && h.anonymous[cl.Net.Listener]:
		// Without a password file, a user name proves nothing: the
		// client is let in as an anonymous one would be.
		g.trusted = true
	case h.passwords == nil:
		h.refusals.add(RefuseUnknownUser, who, "user", excerpt([]byte(user), 64), "detail", "no password file")
		return false
	default:
		ok, known := h.passwords.Check(user, pk.Connect.Password)
		switch {
		case !known:
			h.refusals.add(RefuseUnknownUser, who, "user", excerpt([]byte(user), 64))
			return false
		case !ok:
			h.refusals.add(RefuseBadPassword, who, "user", user)
			return false
		}
	}
	if !g.trusted {
		if h.rate > 0 {
			// A burst of one second, capped so that an int holds it on any board.
			g.limit = rate.NewLimiter(rate.Limit(h.rate), int(min(math.Ceil(h.rate), 1<<30)))
		}
	}
	// A will is published without the broker's ACL check: check it now.
	if pk.Connect.WillFlag {
		if reason := h.writeReason(g, h.policy.Load(), pk.Connect.WillTopic); reason != "" {
			h.refusals.add(reason, who, "will_topic", excerpt([]byte(pk.Connect.WillTopic), 128))
			return false
		}
	}
	if !g.trusted {
		// Client ids are per user: one user's client cannot take over
		// another user's session, nor inherit its messages.
		cl.ID = g.user + "/" + cl.ID
	}
	h.clients.Store(cl, g)
	return true
}

// OnACLCheck reports whether a client may publish to a topic (write), or
// subscribe to a filter or receive a message on a topic (read).
func (h *guardHook) OnACLCheck(cl *mqtt.Client, topic string, write bool) bool {
	v, ok := h.clients.Load(cl)
	if !ok {
		return false
	}
	g := v.(*clientGuard)
	p := h.policy.Load()
	if !write {
		return h.readReason(g, p, topic) == ""
	}
	g.judged.Store(p)
	if g.trusted { // no cache: a bridge publishes to many topics in turn
		if reason := h.writeReason(g, p, topic); reason != "" {
			h.refusals.add(reason, clientName(cl), "topic", excerpt([]byte(topic), 128))
			return false
		}
		return true
	}
	if last := g.lastWrite.Load(); last != nil && last.gen == p && last.topic == topic {
		if last.reason != "" {
			h.refusals.add(last.reason, clientName(cl), "topic", excerpt([]byte(topic), 128))
		}
		return last.reason == ""
	}
	reason := h.writeReason(g, p, topic)
	g.lastWrite.Store(&verdict{gen: p, topic: topic, reason: reason})
	if reason != "" {
		h.refusals.add(reason, clientName(cl), "topic", excerpt([]byte(topic), 128))
	}
	return reason == ""
}

// writeReason returns why the client may not publish to topic under p, or
// "" if it may (userRules.writeReason).
func (h *guardHook) writeReason(g *clientGuard, p *policy, topic string) string {
	switch {
	case topicLevels(topic) > MaxTopicLevels:
		return RefuseTopicTooDeep
	case g.trusted:
		return ""
	}
	return g.rulesUnder(p).writeReason(g.user, topic)
}

func (h *guardHook) readReason(g *clientGuard, p *policy, filter string) string {
	switch {
	case topicLevels(filter) > MaxTopicLevels:
		return RefuseTopicTooDeep
	case g.trusted || g.rulesUnder(p).canRead(filter):
		return ""
	}
	return RefuseSubscribe
}

// judged returns the policy by which the client's latest PUBLISH was
// judged, or the policy in effect if none was.
func (h *guardHook) judged(cl *mqtt.Client) *policy {
	if v, ok := h.clients.Load(cl); ok {
		if p := v.(*clientGuard).judged.Load(); p != nil {
			return p
		}
	}
	return h.policy.Load()
}

// OnSubscribe counts the filters that the ACL will refuse; mochi then
// answers them with a failure code.
func (h *guardHook) OnSubscribe(cl *mqtt.Client, pk packets.Packet) packets.Packet {
	v, ok := h.clients.Load(cl)
	if !ok {
		return pk
	}
	g := v.(*clientGuard)
	p := h.policy.Load()
	for _, sub := range pk.Filters {
		if reason := h.readReason(g, p, sub.Filter); reason != "" {
			h.refusals.add(reason, clientName(cl), "filter", excerpt([]byte(sub.Filter), 128))
		}
	}
	return pk
}

// OnPacketRead holds a client that publishes faster than the rate limit
// back: its connection is not read until the message is due. No message
// is lost; the sender slows down.
func (h *guardHook) OnPacketRead(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Type != packets.Publish || h.rate <= 0 {
		return pk, nil
	}
	v, ok := h.clients.Load(cl)
	if !ok {
		return pk, nil
	}
	g := v.(*clientGuard)
	if g.trusted {
		return pk, nil
	}
	if g.limit == nil || g.limit.Allow() { // Allow takes no token when it refuses
		return pk, nil
	}
	// Over the rate: the message is held until its token comes (a
	// reservation, which allocates, only here).
	h.refusals.add(RefuseRateLimited, clientName(cl))
	time.Sleep(g.limit.Reserve().Delay())
	return pk, nil
}

// OnPublishDropped counts a message dropped because a subscriber's write
// buffer was full.
func (h *guardHook) OnPublishDropped(cl *mqtt.Client, _ packets.Packet) {
	h.refusals.add(RefuseWriteBuffer, clientName(cl))
}

// OnDisconnect forgets the client.
func (h *guardHook) OnDisconnect(cl *mqtt.Client, _ error, _ bool) {
	h.clients.Delete(cl)
}

func clientName(cl *mqtt.Client) string {
	if cl.ID != "" {
		return cl.ID
	}
	return cl.Net.Remote
}

// remoteHost returns the host of a host:port address.
func remoteHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

// peerCommonName returns the common name of a TLS client's verified
// certificate, or "".
func peerCommonName(c net.Conn) string {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return ""
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return ""
	}
	return st.VerifiedChains[0][0].Subject.CommonName
}
