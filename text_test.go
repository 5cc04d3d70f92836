package posture

import "testing"

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"Windows 10.0.19045":               "Windows 10.0.19045",
		"naïve café ✓":                     "naïve café ✓",
		"Windows\x1b[31mRED\a":             `Windows\x1b[31mRED\a`,
		"6.1\n\rINJECTED LINE":             `6.1\n\rINJECTED LINE`,
		"a\tb":                             `a\tb`,
		"evil\u202etxt.exe":                `evil\u202etxt.exe`,
		"bad \xff byte":                    `bad \xff byte`,
		`already "quoted" \ but printable`: `already "quoted" \ but printable`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
	if got := PrintableLines("line 1\tcol\x1b[2J\nline 2"); got != "line 1\tcol\\x1b[2J\nline 2" {
		t.Errorf("PrintableLines: %q", got)
	}
}

func TestRedactedURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.example/x?a=1":         "https://hooks.example/x?a=1",
		"https://user:s3cret@hooks.example/x": "https://user:xxxxx@hooks.example/x",
		"https://user:s3cret PW@example.com/": "https://xxxxx@example.com/",
		"https://us%zzer:s3cretPW@[::1/":      "https://xxxxx@[::1/",
		"not a url":                           "not a url",
	} {
		if got := RedactedURL(in); got != want {
			t.Errorf("RedactedURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCount: a count takes the noun of its number.
func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 identities"}, {1, "1 identity"}, {2, "2 identities"}} {
		if got := Count(c.n, "identity", "identities"); got != c.want {
			t.Errorf("Count(%d): %q, want %q", c.n, got, c.want)
		}
	}
}
