package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/seed-0809debe/posture/api"
)

// TestSlowClientsOverHTTP2: one address that multiplexes many slow POSTs
// over HTTP/2 holds at most --max-connections-per-source of them; the
// others are answered 429 SERVER_TOO_MANY_REQUESTS at once, in the error
// envelope, and another address is answered meanwhile.
func TestSlowClientsOverHTTP2(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout = 20*time.Second, 20*time.Second, 20*time.Second
	cfg.MaxConnections, cfg.MaxConnsPerSource = 100, 8
	n := startTestNode(t, cfg)
	addr := limitedServer(t, n, cfg)

	h2From := func(ip string) *http.Client {
		return &http.Client{Transport: &http.Transport{
			ForceAttemptHTTP2: true,
			DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext,
			TLSClientConfig:   &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost"},
		}}
	}
	// Two HTTP/2 connections from one address, 16 streams each (the most
	// the server allows), each a POST that announces 100,000 bytes and
	// sends one.
	const posts = 2 * maxStreams
	type answer struct {
		resp *http.Response
		err  error
	}
	answers := make(chan answer, posts)
	var bodies []*io.PipeWriter
	defer func() {
		for _, w := range bodies {
			w.CloseWithError(io.ErrUnexpectedEOF)
		}
	}()
	var clients []*http.Client
	for range 2 {
		c := h2From("127.0.0.2")
		defer c.CloseIdleConnections()
		clients = append(clients, c)
		// The connection and its settings first.
		resp, err := c.Get("https://" + addr + api.ClientBase + "/version")
		if err != nil || resp.ProtoMajor != 2 {
			t.Fatalf("HTTP/2 GET: %v %v", resp, err)
		}
		resp.Body.Close()
		for range maxStreams {
			r, w := io.Pipe()
			bodies = append(bodies, w)
			req, _ := http.NewRequest(http.MethodPost, "https://"+addr+api.ClientBase+"/authenticate?method=password", r)
			req.ContentLength = 100000
			req.Header.Set("Content-Type", "application/json")
			go func() { _, _ = w.Write([]byte("{")) }()
			go func() {
				resp, err := c.Do(req)
				answers <- answer{resp, err}
			}()
		}
	}
	slow := clients[0]
	// Every POST over the cap is answered at once; the ones held are not.
	deadline := time.After(10 * time.Second)
	for i := range posts - cfg.MaxConnsPerSource {
		select {
		case a := <-answers:
			if a.err != nil {
				t.Fatalf("slow POST %d: %v", i, a.err)
			}
			var env struct {
				Error struct{ Code string } `json:"error"`
			}
			err := json.NewDecoder(a.resp.Body).Decode(&env)
			a.resp.Body.Close()
			if a.resp.ProtoMajor != 2 || a.resp.StatusCode != http.StatusTooManyRequests || err != nil || env.Error.Code != "SERVER_TOO_MANY_REQUESTS" {
				t.Fatalf("slow POST %d over the cap: HTTP/%d %d %+v %v, want HTTP/2 429 SERVER_TOO_MANY_REQUESTS", i, a.resp.ProtoMajor, a.resp.StatusCode, env, err)
			}
		case <-deadline:
			t.Fatalf("only %d of %d POSTs over the per-source cap were answered", i, posts-cfg.MaxConnsPerSource)
		}
	}
	select {
	case a := <-answers:
		t.Fatalf("a POST within the cap was answered before its body: %v %v", a.resp, a.err)
	case <-time.After(200 * time.Millisecond):
	}

	// Another address is answered meanwhile.
	other := h2From("127.0.0.3")
	defer other.CloseIdleConnections()
	resp, err := other.Get("https://" + addr + api.ClientBase + "/version")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("another address while one is slow: %v %v", resp, err)
	}
	resp.Body.Close()
	// Once the held POSTs end, the address may send again.
	for _, w := range bodies {
		w.CloseWithError(io.ErrUnexpectedEOF)
	}
	for range cfg.MaxConnsPerSource {
		if a := <-answers; a.err == nil {
			a.resp.Body.Close()
		}
	}
	// A client learns its stream was reset before the server's handler has
	// seen it end, so the address's slots come back shortly after.
	for wait := time.Now().Add(5 * time.Second); ; {
		resp, err = slow.Get("https://" + addr + api.ClientBase + "/version")
		if err == nil && resp.StatusCode == http.StatusOK {
			resp.Body.Close()
			break
		}
		if err == nil {
			resp.Body.Close()
		}
		if time.Now().After(wait) {
			t.Fatalf("the address 5 s after its slow POSTs ended: %v %v", resp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHTTP2HeaderLimits: over HTTP/2 the server announces at most 16
// concurrent streams, and a request whose header list is over 64 KiB is
// answered 431, as over HTTP/1.1. (Go's HTTP/2 server closes the
// connection instead when a header block is more than about twice the
// limit, or one field alone is over it: see Hard edges in docs/security.md.)
func TestHTTP2HeaderLimits(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	cfg := n.cfg
	cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout = 10*time.Second, 10*time.Second, 10*time.Second
	addr := limitedServer(t, n, cfg)

	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// The server's settings first: its frame size allows the whole header
	// block in one frame.
	var streams uint32
	for streams == 0 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := f.(*http2.SettingsFrame); ok && !f.IsAck() {
			v, _ := f.Value(http2.SettingMaxConcurrentStreams)
			streams = v
			_ = fr.WriteSettingsAck()
		}
	}
	if streams != maxStreams {
		t.Fatalf("the server announced %d concurrent streams, want %d", streams, maxStreams)
	}
	// Ten fields of 7 KiB: 70 KiB of headers, no field alone over the limit.
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "localhost"}, {":path", api.ClientBase + "/version"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := range 10 {
		_ = enc.WriteField(hpack.HeaderField{Name: "x-padding-" + string(rune('a'+i)), Value: strings.Repeat("x", 7<<10), Sensitive: true})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no answer to 70 KiB of headers over HTTP/2: %v", err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				continue
			}
			if got := f.PseudoValue("status"); got != "431" {
				t.Fatalf("70 KiB of headers over HTTP/2: status %s, want 431", got)
			}
			return
		case *http2.GoAwayFrame:
			t.Fatalf("70 KiB of headers over HTTP/2: GOAWAY %v", f.ErrCode)
		}
	}
}
