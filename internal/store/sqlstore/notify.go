package sqlstore

import "sync"

// broadcaster wakes every waiting claimer. Each subscriber has a one-slot channel, so a
// wake-up that arrives while it is busy is kept, and a slow one never blocks the sender.
type broadcaster struct {
	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

func newBroadcaster() *broadcaster { return &broadcaster{subs: map[chan struct{}]struct{}{}} }

func (b *broadcaster) subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		delete(b.subs, ch)
		b.mu.Unlock()
	}
}

func (b *broadcaster) broadcast() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// noticeBuffer is how many notices a subscriber may have waiting before newer ones are
// dropped for it.
const noticeBuffer = 1024

// topics delivers published notices to this replica's subscribers.
type topics struct {
	mu   sync.Mutex
	subs map[string]map[chan string]struct{}
}

func (ts *topics) subscribe(topic string) (<-chan string, func()) {
	ch := make(chan string, noticeBuffer)
	ts.mu.Lock()
	if ts.subs == nil {
		ts.subs = map[string]map[chan string]struct{}{}
	}
	if ts.subs[topic] == nil {
		ts.subs[topic] = map[chan string]struct{}{}
	}
	ts.subs[topic][ch] = struct{}{}
	ts.mu.Unlock()
	return ch, func() {
		ts.mu.Lock()
		delete(ts.subs[topic], ch)
		ts.mu.Unlock()
	}
}

func (ts *topics) deliver(topic, payload string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for ch := range ts.subs[topic] {
		select {
		case ch <- payload:
		default:
		}
	}
}
