package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/seed-0809debe/posture/api"
)

var rewriteSpecs = flag.Bool("rewrite", false, "add missing operations to the OpenAPI documents and drop stale ones")

// specOp is what the parity test reads of an operation.
type specOp struct {
	OperationID string `json:"operationId"`
	Access      string `json:"x-access"`
}

// specFile is the path of an API's OpenAPI document, from this package.
func specFile(base string) string {
	if base == api.ClientBase {
		return filepath.Join("..", "..", "api", "client", "openapi.json")
	}
	return filepath.Join("..", "..", "api", "management", "openapi.json")
}

// rewriteSpec brings an OpenAPI document in line with the routes: existing
// operations keep their text, new ones get a generated operationId and
// summary, and operations without a route are dropped. Review the diff.
func rewriteSpec(base string, routes []api.Route) error {
	path := specFile(base)
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	old, _ := doc["paths"].(map[string]any)
	paths := map[string]any{}
	for _, r := range routes {
		p := echoParam.ReplaceAllString(r.Path, "{$1}")
		m := strings.ToLower(r.Method)
		ops, _ := paths[p].(map[string]any)
		if ops == nil {
			ops = map[string]any{}
			paths[p] = ops
		}
		oldOps, _ := old[p].(map[string]any)
		if prev, ok := oldOps[m].(map[string]any); ok {
			prev["x-access"] = r.Access.String()
			ops[m] = prev
			continue
		}
		ops[m] = newOperation(r.Method, p, r.Access)
	}
	doc["paths"] = paths
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(out, '\n'), 0o644)
}

var word = regexp.MustCompile(`[a-z]+`)

func camel(seg string, singular bool) string {
	words := strings.Split(seg, "-")
	if singular {
		last := words[len(words)-1]
		switch {
		case strings.HasSuffix(last, "ies"):
			last = strings.TrimSuffix(last, "ies") + "y"
		case strings.HasSuffix(last, "s"):
			last = strings.TrimSuffix(last, "s")
		}
		words[len(words)-1] = last
	}
	for i, w := range words {
		if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, "")
}

func newOperation(method, path string, access api.Access) map[string]any {
	var segs, params []string
	for _, s := range strings.Split(path, "/") {
		switch {
		case s == "":
		case strings.HasPrefix(s, "{"):
			params = append(params, strings.Trim(s, "{}"))
		default:
			segs = append(segs, s)
		}
	}
	verbs := map[string]string{"GET": "detail", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
	verb := verbs[method]
	if method == "GET" && !strings.HasSuffix(path, "}") {
		verb = "list"
	}
	id := verb
	for i, s := range segs {
		id += camel(s, i < len(segs)-1 || (verb != "list" && len(params) > 0 && strings.HasSuffix(path, "}")))
	}
	op := map[string]any{
		"operationId": id,
		"summary":     strings.Join(word.FindAllString(strings.ToLower(verb+" "+strings.Join(segs, " ")), -1), " "),
		"x-access":    access.String(),
		// A placeholder answer: document the real one (the contract
		// transport refuses answers off the document).
		"responses": map[string]any{
			"200": map[string]any{"description": "OK", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
				"type": "object", "required": []any{"data", "meta"},
				"properties": map[string]any{"data": map[string]any{}, "meta": map[string]any{"$ref": "#/components/schemas/meta"}},
			}}}},
			"429": map[string]any{"$ref": "#/components/responses/tooManyRequests"},
		},
	}
	if access != api.Public {
		op["responses"].(map[string]any)["401"] = map[string]any{"$ref": "#/components/responses/unauthorized"}
	}
	if access == api.Public {
		op["security"] = []any{}
	} else {
		op["security"] = []any{map[string]any{"ztSession": []any{}}}
	}
	var ps []any
	for _, p := range params {
		ps = append(ps, map[string]any{"name": p, "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	if len(ps) > 0 {
		op["parameters"] = ps
	}
	return op
}
