package posture

import "time"

// PostureResponse is one answer of an endpoint to a posture query, as
// submitted to POST /posture-response. Only the fields of its TypeID are set.
type PostureResponse struct {
	ID     string `json:"id"`
	TypeID string `json:"typeId"`

	// OS
	Type    string `json:"type,omitempty"`
	Version string `json:"version,omitempty"`
	Build   string `json:"build,omitempty"`
	// MAC
	MACAddresses []string `json:"macAddresses,omitempty"`
	// DOMAIN
	Domain string `json:"domain,omitempty"`
	// PROCESS
	Path               string   `json:"path,omitempty"`
	IsRunning          bool     `json:"isRunning,omitempty"`
	Hash               string   `json:"hash,omitempty"`
	SignerFingerprints []string `json:"signerFingerprints,omitempty"`
	// ENDPOINT_STATE
	Woken    bool `json:"woken,omitempty"`
	Unlocked bool `json:"unlocked,omitempty"`
}

// Posture response type ids that are not check types.
const ResponseEndpointState = "ENDPOINT_STATE"

// IdentityPosture is the identity-wide posture data: shared by all of the
// identity's API sessions. A nil slot means nothing was received yet.
type IdentityPosture struct {
	OS        *OSPosture       `json:"os,omitempty"`
	MAC       *MACPosture      `json:"mac,omitempty"`
	Domain    *DomainPosture   `json:"domain,omitempty"`
	Processes []ProcessPosture `json:"processes,omitempty"` // sorted by path, then check id
}

// OSPosture is the last OS response.
type OSPosture struct {
	CheckID string    `json:"postureCheckId"`
	At      time.Time `json:"lastUpdatedAt"`
	Type    string    `json:"type"`
	Version string    `json:"version"`
	Build   string    `json:"build,omitempty"`
}

// MACPosture is the last MAC response; addresses are normalised hex.
type MACPosture struct {
	CheckID   string    `json:"postureCheckId"`
	At        time.Time `json:"lastUpdatedAt"`
	Addresses []string  `json:"addresses"`
}

// DomainPosture is the last DOMAIN response.
type DomainPosture struct {
	CheckID string    `json:"postureCheckId"`
	At      time.Time `json:"lastUpdatedAt"`
	Domain  string    `json:"domain"`
}

// ProcessPosture is the last PROCESS response for one path and one check id
// (the query it answered); hash and fingerprints are normalised hex.
type ProcessPosture struct {
	CheckID            string    `json:"postureCheckId"`
	At                 time.Time `json:"lastUpdatedAt"`
	Path               string    `json:"path"`
	IsRunning          bool      `json:"isRunning"`
	Hash               string    `json:"binaryHash,omitempty"`
	SignerFingerprints []string  `json:"signerFingerprints"`
}

// SessionPosture is the posture data of one API session: MFA and the
// endpoint's wake and unlock signals.
type SessionPosture struct {
	APISessionID string     `json:"apiSessionId"`
	MFAPassedAt  *time.Time `json:"passedMfaAt,omitempty"`
	// MFATimedOutAt is when an evaluation found an MFA check's timeout
	// elapsed since MFAPassedAt: MFA checks fail from then on, whatever
	// their timeouts become, until MFA is passed again (a later
	// MFAPassedAt).
	MFATimedOutAt *time.Time `json:"mfaTimedOutAt,omitempty"`
	WokenAt       *time.Time `json:"wokenAt,omitempty"`
	UnlockedAt    *time.Time `json:"unlockedAt,omitempty"`
	SDKInfo       *SDKInfo   `json:"sdkInfo,omitempty"`
}

// MFATimedOut says whether the session's MFA timed out since it was last
// passed (sticky until a new pass).
func (s SessionPosture) MFATimedOut() bool {
	return s.MFATimedOutAt != nil && s.MFAPassedAt != nil && !s.MFAPassedAt.After(*s.MFATimedOutAt)
}

// SDKInfo is what a client says of its SDK when it authenticates.
type SDKInfo struct {
	Type       string `json:"type,omitempty"`
	Version    string `json:"version,omitempty"`
	Branch     string `json:"branch,omitempty"`
	Revision   string `json:"revision,omitempty"`
	AppID      string `json:"appId,omitempty"`
	AppVersion string `json:"appVersion,omitempty"`
}

// EnvInfo is what a client says of its environment when it authenticates.
type EnvInfo struct {
	OS        string `json:"os,omitempty"`
	Arch      string `json:"arch,omitempty"`
	OSRelease string `json:"osRelease,omitempty"`
	OSVersion string `json:"osVersion,omitempty"`
	Domain    string `json:"domain,omitempty"`
	Hostname  string `json:"hostname,omitempty"`
}
