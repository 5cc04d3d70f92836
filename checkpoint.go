package posture

// TypeLogCheckpointed is the event type of a signed checkpoint of the log.
const TypeLogCheckpointed = "log.checkpointed"

// SubjectCheckpoint is the log subject of checkpoints. Checkpoints are
// appended with optimistic concurrency on it, so that of several nodes
// racing to cover the same range only one lands.
const SubjectCheckpoint = "checkpoint"

func init() { register(LogCheckpointed{}) }

// LogCheckpointed is a signed statement about the log: the messages with
// sequences From..To (inclusive), hashed in order and chained to the previous
// checkpoint, are the ones that were written. Anyone with the CA certificate
// can recompute it from the stream and tell which sequence was deleted,
// altered or inserted since (eventlog computes and verifies it).
//
// A checkpoint is a fact about the log, not about the model: projections
// ignore it, and it is itself covered by a later checkpoint.
type LogCheckpointed struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	// Prev is the hex digest of the previous checkpoint; empty for the
	// first one, whose From is 1.
	Prev string `json:"prev,omitempty"`
	// Root is the hex SHA-256 chained from Prev over the leaf hashes of
	// From..To in order.
	Root string `json:"root"`
	// Leaves is the base64 of one 8-byte fingerprint (a leaf hash's first
	// bytes) per sequence From..To, zero for a sequence that was missing
	// when the checkpoint was made, so that a verifier can name the first
	// sequence that differs.
	Leaves string `json:"leaves"`
	// KeyID is the SHA-256 fingerprint (hex) of the certificate whose key
	// signed the checkpoint.
	KeyID string `json:"keyId"`
	// Signature is the base64 signature over the checkpoint's digest.
	Signature string `json:"signature"`
}

func (LogCheckpointed) EventType() string { return TypeLogCheckpointed }
func (LogCheckpointed) Subject() string   { return SubjectCheckpoint }
