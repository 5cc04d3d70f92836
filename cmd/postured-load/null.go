package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// nullCmd is the null HTTPS server: Go's net/http over TLS (the same
// versions and curve as postured), which reads and decodes each request's
// JSON body and answers 201 with a small JSON envelope. It is the upper
// bound of what any Go HTTPS handler can do on the machine. With --busy it
// also computes for about that much CPU time per request: a plain server
// that costs what postured costs, the floor of postured's latency at the
// same rate.
type nullCmd struct {
	Listen string        `default:"127.0.0.1:0" help:"Address to listen on."`
	CAOut  string        `name:"ca-out" help:"Write the server's (self-signed) certificate here, PEM, for clients to trust."`
	Busy   time.Duration `help:"CPU time to spend computing in each request's handler (SHA-256 rounds, calibrated at start)."`
}

// nullReady is the line the null server prints on stdout once it listens.
const nullReady = "null listening on https://"

func (c *nullCmd) Run(ctx context.Context) error {
	cert, pemCert, err := selfSigned()
	if err != nil {
		return err
	}
	if c.CAOut != "" {
		if err := os.WriteFile(c.CAOut, pemCert, 0o600); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return err
	}
	handler := http.HandlerFunc(nullHandler)
	if c.Busy > 0 {
		rounds := int(c.Busy.Seconds() * hashRate())
		handler = func(w http.ResponseWriter, r *http.Request) {
			spin(rounds)
			nullHandler(w, r)
		}
	}
	srv := &http.Server{
		Handler:           handler,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	fmt.Printf("%s%s\n", nullReady, ln.Addr())
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

var nullAnswer = []byte(`{"data":{"services":[]},"meta":{}}`)

func nullHandler(w http.ResponseWriter, r *http.Request) {
	var body any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(nullAnswer)
}

// spin computes n rounds of SHA-256 over a kilobyte.
func spin(n int) byte {
	var buf [1024]byte
	for range n {
		h := sha256.Sum256(buf[:])
		buf[0] = h[0]
	}
	return buf[0]
}

// hashRate is how many rounds of spin this process computes per second of
// its CPU time, the best of five short measures.
func hashRate() float64 {
	const n = 2000
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := math.Inf(1)
	for range 5 { // the others were interrupted
		begin := threadCPU()
		spin(n)
		best = min(best, (threadCPU() - begin).Seconds())
	}
	return n / best
}

// threadCPU is the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// selfSigned is an ECDSA P-256 certificate for localhost and 127.0.0.1, as
// postured's server certificate.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "postured-load null"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
