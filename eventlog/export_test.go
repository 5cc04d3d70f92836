package eventlog

// EncodeForTest exposes encode to the external tests.
var EncodeForTest = encode

// DecodeForTest exposes decode to the external tests.
var DecodeForTest = decode
