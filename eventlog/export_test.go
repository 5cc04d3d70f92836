package eventlog

// EncodeForTest exposes encode to the external tests.
var EncodeForTest = encode
