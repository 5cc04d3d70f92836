package eventlog

// EncodeForTest exposes encode to the external tests.
var EncodeForTest = encode

// DecodeForTest exposes decode to the external tests.
var DecodeForTest = decode

// HoldGroupPublishes makes every publish of l's group commit of posture
// responses and activity (not of session decisions) wait for a value on
// release first.
func HoldGroupPublishes(l *Log, release <-chan struct{}) {
	l.group.beforePublish = func() { <-release }
}

// QueuedForTest is how many appends wait in l's group commit of posture
// responses and activity.
func (l *Log) QueuedForTest() int {
	l.group.mu.Lock()
	defer l.group.mu.Unlock()
	return len(l.group.queue)
}

// PublishingForTest says whether l's group commit of posture responses and
// activity has a publish in flight.
func (l *Log) PublishingForTest() bool {
	l.group.mu.Lock()
	defer l.group.mu.Unlock()
	return l.group.busy
}
