package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-0809debe/posture/api"
)

// rssMB is the resident memory of a process, in MB, and its open files.
func rssMB(b *testing.B, pid int) (float64, int) {
	b.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	var kb float64
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	fds, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return kb / 1024, len(fds)
}

// BenchmarkSlowClients measures the real binary under b.N slow-body
// connections (a TLS POST announcing a 100,000-byte body that sends one
// byte), from loopback addresses: the resident memory and the
// open files of the server once they are all attempted, and the time it
// takes to answer GET /version to a new client on a new connection from
// another address meanwhile (-1: not answered within 5 s). "one-source":
// every connection from one address, default limits (the per-source cap
// applies). "many-sources": 50 connections per address, default caps and a
// read timeout long enough to hold every connection accepted (the memory
// bound). "uncapped": no caps and no read timeout, as postured was. Run
// with -benchtime 16000x (one round per sub-benchmark).
func BenchmarkSlowClients(b *testing.B) {
	for _, c := range []struct {
		name      string
		perSource int64 // connections per source address
		env       []string
	}{
		{"one-source", 1 << 40, nil},
		{"many-sources", 50, []string{"POSTURED_READ_TIMEOUT=10m"}},
		{"uncapped", 50, []string{"POSTURED_READ_TIMEOUT=0", "POSTURED_MAX_CONNECTIONS=0", "POSTURED_MAX_CONNECTIONS_PER_SOURCE=0"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			if b.N == 1 {
				return // the probe round; the measurement needs -benchtime Nx
			}
			dir := b.TempDir()
			p := startBinary(b, dir, append(c.env, "POSTURED_ADMIN_PASSWORD="+testAdminPassword)...)
			pid := p.cmd.Process.Pid
			before, fdsBefore := rssMB(b, pid)
			addr := strings.TrimPrefix(p.base, "https://")
			caPEM, err := os.ReadFile(filepath.Join(dir, "pki", "ca.pem"))
			if err != nil {
				b.Fatal(err)
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(caPEM)

			var open, refused atomic.Int64
			var mu sync.Mutex
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range 256 {
				wg.Go(func() {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						src := net.IPv4(127, 2, byte(i/c.perSource/250), byte(1+i/c.perSource%250))
						d := &net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: src}}
						conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"http/1.1"}})
						if err == nil {
							_ = conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
							err = slowPost(conn)
						}
						if err != nil {
							if conn != nil {
								conn.Close()
							}
							refused.Add(1)
							continue
						}
						open.Add(1)
						mu.Lock()
						conns = append(conns, conn)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			after, fds := rssMB(b, pid)
			versionMS := freshVersionMS(p.base, pool)
			b.ReportMetric(float64(open.Load()), "held")
			b.ReportMetric(float64(refused.Load()), "refused")
			b.ReportMetric(before, "rss-MB-before")
			b.ReportMetric(after, "rss-MB")
			b.ReportMetric(float64(fds-fdsBefore), "fds-added")
			b.ReportMetric(versionMS, "version-ms")
		})
	}
}

// BenchmarkSlowClientsHTTP2 is BenchmarkSlowClients over HTTP/2, from one
// address with the default limits: b.N POSTs that announce a 100,000-byte
// body and send one byte, multiplexed 16 to a connection (the most the
// server allows). Reported: the POSTs held (the rest refused: 429, or the
// connection closed over the per-source cap), the resident memory and the
// time another address waits for GET /version. Run with -benchtime
// 20000x.
func BenchmarkSlowClientsHTTP2(b *testing.B) {
	if b.N == 1 {
		return
	}
	dir := b.TempDir()
	p := startBinary(b, dir, "POSTURED_ADMIN_PASSWORD="+testAdminPassword)
	pid := p.cmd.Process.Pid
	before, _ := rssMB(b, pid)
	caPEM, err := os.ReadFile(filepath.Join(dir, "pki", "ca.pem"))
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	var held, refused atomic.Int64
	var mu sync.Mutex
	var bodies []*io.PipeWriter
	defer func() {
		for _, w := range bodies {
			w.CloseWithError(io.ErrUnexpectedEOF)
		}
	}()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range 64 {
		wg.Go(func() {
			for {
				start := next.Add(maxStreams) - maxStreams
				if start >= int64(b.N) {
					return
				}
				n := min(maxStreams, int64(b.N)-start)
				tr := &http.Transport{ForceAttemptHTTP2: true,
					DialContext:     (&net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 2, 0, 1)}}).DialContext,
					TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}
				c := &http.Client{Transport: tr, Timeout: 3 * time.Second}
				if resp, err := c.Get(p.base + api.ClientBase + "/version"); err != nil {
					refused.Add(n)
					continue
				} else {
					resp.Body.Close()
				}
				c.Timeout = 0
				var cw sync.WaitGroup
				for range n {
					r, w := io.Pipe()
					mu.Lock()
					bodies = append(bodies, w)
					mu.Unlock()
					req, _ := http.NewRequest(http.MethodPost, p.base+api.ClientBase+"/authenticate?method=password", r)
					req.ContentLength = 100000
					go func() { _, _ = w.Write([]byte("{")) }()
					cw.Go(func() {
						// A POST held has no answer until its body ends: one
						// within 2 s is a refusal.
						done := make(chan struct{})
						go func() {
							defer close(done)
							if resp, err := c.Do(req); err == nil {
								resp.Body.Close()
							}
						}()
						select {
						case <-done:
							refused.Add(1)
						case <-time.After(2 * time.Second):
							held.Add(1)
						}
					})
				}
				cw.Wait()
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	after, _ := rssMB(b, pid)
	versionMS := freshVersionMS(p.base, pool)
	b.ReportMetric(float64(held.Load()), "held")
	b.ReportMetric(float64(refused.Load()), "refused")
	b.ReportMetric(before, "rss-MB-before")
	b.ReportMetric(after, "rss-MB")
	b.ReportMetric(versionMS, "version-ms")
}

// freshVersionMS is how long a new client on a new connection takes to get
// /version answered (milliseconds; -1 when it is not answered within 5 s).
func freshVersionMS(base string, pool *x509.CertPool) float64 {
	fresh := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	start := time.Now()
	resp, err := fresh.Get(base + api.ClientBase + "/version")
	if err != nil {
		return -1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -1
	}
	return float64(time.Since(start).Microseconds()) / 1000
}
