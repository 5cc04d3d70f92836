package posture

import (
	"strings"
	"time"
)

// CheckType is the discriminator of a posture check (its typeId).
type CheckType string

// The posture check types.
const (
	CheckOS           CheckType = "OS"
	CheckMAC          CheckType = "MAC"
	CheckMFA          CheckType = "MFA"
	CheckProcess      CheckType = "PROCESS"
	CheckProcessMulti CheckType = "PROCESS_MULTI"
	CheckDomain       CheckType = "DOMAIN"
)

// CheckTypes lists every posture check type in a stable order.
var CheckTypes = []CheckType{CheckOS, CheckMAC, CheckMFA, CheckProcess, CheckProcessMulti, CheckDomain}

// Semantics of role lists and of PROCESS_MULTI checks.
const (
	AllOf = "AllOf"
	AnyOf = "AnyOf"
)

// Tags is a user-defined map; values are null, strings or booleans.
type Tags map[string]any

// Check is a posture check: a condition on an endpoint's environment. Only
// the fields of its type are set; the others are zero.
type Check struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	TypeID         CheckType `json:"typeId"`
	RoleAttributes []string  `json:"roleAttributes"`
	Tags           Tags      `json:"tags"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`

	// OS
	OperatingSystems []OperatingSystem `json:"operatingSystems,omitempty"`
	// MAC: addresses as given (validated hex); compare with NormalizeHex.
	MACAddresses []string `json:"macAddresses,omitempty"`
	// DOMAIN
	Domains []string `json:"domains,omitempty"`
	// PROCESS
	Process *Process `json:"process,omitempty"`
	// PROCESS_MULTI
	Semantic  string    `json:"semantic,omitempty"`
	Processes []Process `json:"processes,omitempty"`
	// MFA. TimeoutSeconds <= 0 is stored as -1: no timeout.
	TimeoutSeconds        int64 `json:"timeoutSeconds,omitempty"`
	PromptOnWake          bool  `json:"promptOnWake,omitempty"`
	PromptOnUnlock        bool  `json:"promptOnUnlock,omitempty"`
	IgnoreLegacyEndpoints bool  `json:"ignoreLegacyEndpoints,omitempty"`

	// Stale evidence (OS, MAC, DOMAIN, PROCESS, PROCESS_MULTI): evidence
	// older than MaxAgeSeconds (0: no limit) is stale, and OnStale says
	// whether a stale check denies (OnStaleDeny, the default) or still
	// judges the old values (OnStaleAllow).
	MaxAgeSeconds int64  `json:"maxAgeSeconds,omitempty"`
	OnStale       string `json:"onStale,omitempty"`

	// Enforcement is how a failing verdict acts (nil: enforced, as in
	// OpenZiti). See Enforcement.
	Enforcement *Enforcement `json:"enforcement,omitempty"`
}

// Enforcement is a posture check's enforcement mode. A check in report
// mode is evaluated and recorded like an enforced one, but its failing
// verdict never denies a session nor removes one: each request it would
// have denied is recorded as a would-deny. EnforceAt, when set, is the
// instant the check switches to enforce (a CheckEnforced event in the log).
type Enforcement struct {
	Mode      string     `json:"mode"`
	EnforceAt *time.Time `json:"enforceAt"`
	// Message is shown to the user (in the client's postureQueries) while
	// the check only reports.
	Message string `json:"message,omitempty"`
}

// Enforcement modes.
const (
	EnforceMode = "enforce"
	ReportMode  = "report"
)

// MaxEnforcementMessage is the longest enforcement message, in characters.
const MaxEnforcementMessage = 500

// ReportOnly reports whether the check only reports at a time: its mode is
// report and its enforceAt, if any, is still ahead (a check is enforced
// from the instant of its enforceAt on).
func (c Check) ReportOnly(at time.Time) bool {
	e := c.Enforcement
	return e != nil && e.Mode == ReportMode && (e.EnforceAt == nil || at.Before(*e.EnforceAt))
}

// What a check with MaxAgeSeconds does with stale evidence.
const (
	OnStaleDeny  = "deny"
	OnStaleAllow = "allow"
)

// OperatingSystem is one entry of an OS check. Versions are semver range
// statements; an entry without versions accepts any version.
type OperatingSystem struct {
	Type     string   `json:"type"`
	Versions []string `json:"versions"`
}

// Process is one process a PROCESS or PROCESS_MULTI check requires. Hashes
// (SHA-256, lower-case hex) and signer fingerprints (SHA-1, lower-case hex)
// are optional constraints.
type Process struct {
	OSType             string   `json:"osType"`
	Path               string   `json:"path"`
	Hashes             []string `json:"hashes"`
	SignerFingerprints []string `json:"signerFingerprints"`
}

// The canonical operating system type names.
const (
	OSWindows       = "Windows"
	OSWindowsServer = "WindowsServer"
	OSLinux         = "Linux"
	OSMacOS         = "macOS"
	OSIOS           = "iOS"
	OSAndroid       = "Android"
)

// OSTypes lists the supported operating system types in canonical spelling.
var OSTypes = []string{OSWindows, OSWindowsServer, OSLinux, OSMacOS, OSIOS, OSAndroid}

// CanonicalOSType maps any spelling of a supported OS type ("WINDOWS",
// "Windows Server", "macos", "windows_server") to its canonical name.
func CanonicalOSType(s string) (string, bool) {
	key := osKeyReplacer.Replace(strings.ToLower(s))
	for _, t := range OSTypes {
		if strings.EqualFold(t, key) {
			return t, true
		}
	}
	return "", false
}

var osKeyReplacer = strings.NewReplacer(" ", "", "_", "", "-", "")

// NormalizeHex lower-cases s and drops every character that is not a hex
// digit, so that "AA:BB-cc" and "aabbcc" compare equal (MAC addresses,
// hashes, fingerprints).
func NormalizeHex(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToLower(s) {
		if (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') {
			b.WriteRune(r)
		}
	}
	return b.String()
}
