package evaluator

// A small data-driven test runner in the style of cockroachdb/pebble's
// datadriven package, on the standard library only.
//
// A test file is a sequence of cases. Blank lines and lines starting with '#'
// between cases are kept as they are. A case is:
//
//	<command> [key=value ...]
//	<input lines>
//	----
//	<expected output lines>
//
// The expected output ends at the first blank line or at the end of the file,
// so it cannot contain blank lines. Run the tests with -rewrite to replace
// every expected output by the actual one (everything else is kept), then
// review the diff:
//
//	go test ./evaluator/ -run TestEvaluate -rewrite

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of data-driven test files")

// testCase is one case of a data-driven file.
type testCase struct {
	Pos      string            // file:line of the command, for messages
	Line     int               // line number of the command
	Raw      string            // the command line as written
	Cmd      string            // the command word
	Args     map[string]string // key=value arguments of the command line
	Input    string            // lines between the command and "----"
	Expected string            // lines after "----"
}

// chunk is a piece of a file: verbatim text, or a case.
type chunk struct {
	text string
	tc   *testCase
}

func parseTestFile(path, src string) ([]chunk, error) {
	lines := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
	var chunks []chunk
	for i := 0; i < len(lines); {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			chunks = append(chunks, chunk{text: line})
			i++
			continue
		}
		tc := &testCase{Pos: fmt.Sprintf("%s:%d", path, i+1), Line: i + 1, Raw: line, Args: map[string]string{}}
		fields := strings.Fields(line)
		tc.Cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			if _, dup := tc.Args[k]; dup {
				return nil, fmt.Errorf("%s: argument %q given twice", tc.Pos, k)
			}
			tc.Args[k] = v
		}
		i++
		var in []string
		for ; i < len(lines) && lines[i] != "----"; i++ {
			in = append(in, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s: no ---- separator", tc.Pos)
		}
		i++
		var out []string
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			out = append(out, lines[i])
		}
		tc.Input = strings.Join(in, "\n")
		tc.Expected = strings.Join(out, "\n")
		chunks = append(chunks, chunk{tc: tc})
	}
	return chunks, nil
}

// runTestFile runs every case of the file at path through run, which returns
// the actual output. With -rewrite the file is written back with the actual
// outputs instead of comparing them.
func runTestFile(t *testing.T, path string, run func(t *testing.T, tc *testCase) string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := parseTestFile(path, string(src))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range chunks {
		if c.tc == nil {
			b.WriteString(c.text + "\n")
			continue
		}
		tc := c.tc
		got := tc.Expected // kept when the case is skipped (-run) or stops early
		t.Run(fmt.Sprintf("line%d", tc.Line), func(t *testing.T) {
			out := strings.TrimRight(run(t, tc), "\n")
			got = out
			if !*rewrite && out != tc.Expected {
				t.Errorf("%s: output differs (-want +got):\n%s", tc.Pos, cmp.Diff(tc.Expected, out))
			}
		})
		b.WriteString(tc.Raw + "\n")
		if tc.Input != "" {
			b.WriteString(tc.Input + "\n")
		}
		b.WriteString("----\n")
		if got != "" {
			b.WriteString(got + "\n")
		}
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
