package testutil

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Faults are the per-request probabilities of what FaultProxy does
// instead of (or on top of) forwarding a request.
type Faults struct {
	SlowDown    float64       // answer 503 SlowDown without forwarding
	ResetBefore float64       // drop the connection without forwarding
	ResetAfter  float64       // forward, then drop the connection: the request took effect, the response is lost
	CutBody     float64       // forward, send half of the response body, drop the connection
	Delay       float64       // forward after DelayFor
	DelayFor    time.Duration // how long a delayed request waits
}

// FaultProxy is an HTTP proxy in front of an S3 server that injects
// throttling, connection resets and delays. The Host header is passed
// through unchanged, so SigV4 signatures made for the proxy's address
// verify at the server. It also counts requests by method, which the
// benchmarks turn into requests per GiB.
type FaultProxy struct {
	URL    string
	target *url.URL
	tr     *http.Transport

	mu     sync.Mutex
	faults Faults
	rng    *rand.Rand

	Requests map[string]*atomic.Int64 // by HTTP method
	Injected atomic.Int64
	// Sent and Received count the body bytes that passed through the
	// proxy to the server and back: what crossed the client's host.
	Sent, Received atomic.Int64
}

// Bytes is every body byte that passed through the proxy either way.
func (p *FaultProxy) Bytes() int64 { return p.Sent.Load() + p.Received.Load() }

// countingReader counts what a body delivers.
type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// StartFaultProxy starts a proxy to target (an http:// URL) on 127.0.0.1
// for the test. It injects nothing until SetFaults is called.
func StartFaultProxy(t testing.TB, target string, seed uint64) *FaultProxy {
	t.Helper()
	p, stop, err := NewFaultProxy(target, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return p
}

// NewFaultProxy starts a proxy outside tests (benchmarks count requests
// with it); stop ends it.
func NewFaultProxy(target string, seed uint64) (p *FaultProxy, stop func(), err error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, nil, err
	}
	p = &FaultProxy{target: u, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)),
		tr:       &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
		Requests: map[string]*atomic.Int64{}}
	for _, m := range []string{"GET", "HEAD", "PUT", "POST", "DELETE"} {
		p.Requests[m] = &atomic.Int64{}
	}
	srv := httptest.NewServer(p)
	p.URL = srv.URL
	return p, func() { srv.Close(); p.tr.CloseIdleConnections() }, nil
}

// SetFaults changes the fault mix for the following requests.
func (p *FaultProxy) SetFaults(f Faults) {
	p.mu.Lock()
	p.faults = f
	p.mu.Unlock()
}

// Count returns the number of requests seen (all methods when none given).
func (p *FaultProxy) Count(methods ...string) int64 {
	if len(methods) == 0 {
		methods = []string{"GET", "HEAD", "PUT", "POST", "DELETE"}
	}
	var n int64
	for _, m := range methods {
		if c := p.Requests[m]; c != nil {
			n += c.Load()
		}
	}
	return n
}

type fault int

const (
	none fault = iota
	slowDown
	resetBefore
	resetAfter
	cutBody
	delay
)

func (p *FaultProxy) pick() (fault, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, x := p.faults, p.rng.Float64()
	for _, c := range []struct {
		p float64
		f fault
	}{{f.SlowDown, slowDown}, {f.ResetBefore, resetBefore}, {f.ResetAfter, resetAfter}, {f.CutBody, cutBody}, {f.Delay, delay}} {
		if x < c.p {
			return c.f, f.DelayFor
		}
		x -= c.p
	}
	return none, 0
}

const slowDownXML = `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>fault</RequestId></Error>`

func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if os.Getenv("FAULTPROXY_DEBUG") != "" {
		fmt.Fprintln(os.Stderr, "proxy:", r.Method, r.URL.String())
	}
	if c := p.Requests[r.Method]; c != nil {
		c.Add(1)
	}
	f, d := p.pick()
	if f != none {
		p.Injected.Add(1)
	}
	switch f {
	case slowDown:
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, slowDownXML)
		return
	case resetBefore:
		reset(w)
		return
	case delay:
		time.Sleep(d) // the injected fault itself, not synchronisation
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = r.Host // keep the signed Host
	if r.ContentLength == 0 {
		out.Body = nil
	} else {
		out.Body = countingReader{ReadCloser: r.Body, n: &p.Sent}
	}
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, fmt.Sprintf("fault proxy: %v", err), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if f == resetAfter {
		_, _ = io.Copy(io.Discard, resp.Body)
		reset(w)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if f == cutBody && resp.ContentLength > 1 {
		_, _ = io.CopyN(w, resp.Body, resp.ContentLength/2)
		w.(http.Flusher).Flush()
		reset(w)
		return
	}
	n, _ := io.Copy(w, resp.Body)
	p.Received.Add(n)
}

// reset closes the client's connection with a TCP RST.
func reset(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
