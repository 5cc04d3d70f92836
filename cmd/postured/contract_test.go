package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/client"
	"github.com/seed-0809debe/posture/api/management"
)

// The API documents are the contract: every request a test sends through a
// test node's HTTP client and every response postured answers is validated
// against the served OpenAPI document (kin-openapi's openapi3filter). A
// response that does not match, or a status the document does not list,
// fails the request, and with it the test.
//
// Bad input tests send requests the document refuses on purpose. Such a
// request is let through, and its response must be an error the document
// lists (a 4xx error envelope): the document and postured agree that it is
// wrong. A request the document refuses that postured accepts fails.

// contract is one API's document, ready to route and validate.
type contract struct {
	base   string
	router routers.Router
}

var (
	contractsOnce sync.Once
	contracts     []contract
	contractsErr  error
)

func loadContracts() ([]contract, error) {
	contractsOnce.Do(func() {
		for _, d := range []struct {
			base string
			spec []byte
		}{{api.ClientBase, client.Spec}, {api.ManagementBase, management.Spec}} {
			loader := openapi3.NewLoader()
			doc, err := loader.LoadFromData(d.spec)
			if err != nil {
				contractsErr = fmt.Errorf("%s: %w", d.base, err)
				return
			}
			if err := doc.Validate(loader.Context); err != nil {
				contractsErr = fmt.Errorf("%s: the document is not valid OpenAPI: %w", d.base, err)
				return
			}
			// Requests are routed with their base path cut off.
			doc.Servers = openapi3.Servers{{URL: "/"}}
			r, err := gorillamux.NewRouter(doc)
			if err != nil {
				contractsErr = fmt.Errorf("%s: %w", d.base, err)
				return
			}
			contracts = append(contracts, contract{base: d.base, router: r})
		}
		for _, ct := range []string{"application/pkcs7-mime", "image/png", "application/jwt", "application/x-pem-file", "application/pkcs10"} {
			openapi3filter.RegisterBodyDecoder(ct, rawBody)
		}
	})
	return contracts, contractsErr
}

// rawBody decodes a body that is not JSON as its text.
func rawBody(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	data, err := io.ReadAll(body)
	return string(data), err
}

// apiPath maps a request path to its API and the path within it, as the
// server's rewrite does; system paths (metrics, probes) have no API.
func apiPath(p string) (base, rest string) {
	for _, s := range api.SystemPaths {
		if p == s {
			return "", ""
		}
	}
	switch {
	case p == api.ManagementBase || strings.HasPrefix(p, api.ManagementBase+"/"):
		return api.ManagementBase, strings.TrimPrefix(p, api.ManagementBase)
	case p == api.ClientBase || strings.HasPrefix(p, api.ClientBase+"/"):
		return api.ClientBase, strings.TrimPrefix(p, api.ClientBase)
	case p == "/edge/v1" || strings.HasPrefix(p, "/edge/v1/"):
		return api.ClientBase, strings.TrimPrefix(p, "/edge/v1")
	case strings.HasPrefix(p, "/edge/"):
		return "", ""
	}
	return api.ClientBase, p
}

// contractTransport validates requests and responses against the API
// documents.
type contractTransport struct{ next http.RoundTripper }

func validating(next http.RoundTripper) http.RoundTripper { return contractTransport{next: next} }

func (c contractTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base, rest := apiPath(req.URL.Path)
	if base == "" {
		return c.next.RoundTrip(req)
	}
	all, err := loadContracts()
	if err != nil {
		return nil, err
	}
	var router routers.Router
	for _, ct := range all {
		if ct.base == base {
			router = ct.router
		}
	}
	var reqBody []byte
	if req.Body != nil {
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	if rest == "" {
		rest = "/"
	}
	// The route of the path within its API, as the document names it.
	probe := req.Clone(context.Background())
	probe.URL = &url.URL{Path: rest, RawQuery: req.URL.RawQuery}
	probe.Body = io.NopCloser(bytes.NewReader(reqBody))
	if req.Method == http.MethodHead {
		// HEAD is GET without the content: the document names only GET.
		probe.Method = http.MethodGet
	}
	route, pathParams, routeErr := router.FindRoute(probe)

	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if routeErr != nil {
		// Not in the document: postured must not serve it either.
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			return resp, nil
		}
		resp.Body.Close()
		return nil, fmt.Errorf("openapi %s: %s %s answered %d but the document has no such operation: %v", base, req.Method, rest, resp.StatusCode, routeErr)
	}
	if req.Method == http.MethodHead {
		return resp, nil
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))

	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: probe, PathParams: pathParams, Route: route, Options: opts}
	probe.Body = io.NopCloser(bytes.NewReader(reqBody))
	ctx := context.Background()
	if reqErr := openapi3filter.ValidateRequest(ctx, in); reqErr != nil && !refused(resp.StatusCode) {
		return nil, fmt.Errorf("openapi %s: the document refuses %s %s (%s) but postured answered %d: %v", base, req.Method, rest, clip(reqBody), resp.StatusCode, reqErr)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Options: opts}
	out.SetBodyBytes(respBody)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return nil, fmt.Errorf("openapi %s: the answer to %s %s does not match the document: %d %s: %v", base, req.Method, rest, resp.StatusCode, clip(respBody), err)
	}
	return resp, nil
}

// refused is a status with which postured refuses a request's content.
func refused(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusTooManyRequests
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// TestContractTransportCatchesDrift proves that the validation has teeth: a
// server that answers off the document fails the request, and a refused bad
// request passes only when the server refuses it too.
func TestContractTransportCatchesDrift(t *testing.T) {
	answers := map[string]struct {
		status int
		body   string
	}{
		"/edge/management/v1/services/abc":    {200, `{"data":{"id":7},"meta":{}}`},
		"/edge/management/v1/services":        {201, `{"data":{"id":"x","_links":{"self":{"href":"./services/x"}}},"meta":{}}`},
		"/edge/management/v1/posture-checks":  {400, `{"error":{"code":"COULD_NOT_VALIDATE","message":"bad"},"meta":{}}`},
		"/edge/management/v1/config-types/ab": {418, `{"error":{"code":"TEAPOT","message":"no"},"meta":{}}`},
		"/edge/management/v1/no-such-thing":   {200, `{"data":{},"meta":{}}`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[r.URL.Path]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	defer srv.Close()
	hc := &http.Client{Transport: validating(http.DefaultTransport)}
	call := func(method, path, body string) error {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, c := range []struct {
		name, method, path, body string
		ok                       bool
	}{
		{"a detail whose id is a number", http.MethodGet, "/edge/management/v1/services/abc", "", false},
		{"a bad create the server accepts", http.MethodPost, "/edge/management/v1/services", `{"name":17}`, false},
		{"a good create", http.MethodPost, "/edge/management/v1/services", `{"name":"crm"}`, true},
		{"a bad create both refuse", http.MethodPost, "/edge/management/v1/posture-checks", `{"typeId":"NOPE"}`, true},
		{"a status the document does not list", http.MethodGet, "/edge/management/v1/config-types/ab", "", false},
		{"an operation the document does not have", http.MethodGet, "/edge/management/v1/no-such-thing", "", false},
	} {
		if err := call(c.method, c.path, c.body); (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok=%v", c.name, err, c.ok)
		}
	}
}
