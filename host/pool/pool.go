// Package pool keeps a bounded set of reusable objects, each handed to one
// caller at a time. The policy host uses it for wasm instances: a wazero
// instance called from two goroutines at once corrupts the process, so every
// concurrent Filter or Score caller takes its own.
package pool

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is returned by Get on a closed pool.
var ErrClosed = errors.New("pool is closed")

// Pool hands out objects of type T, creating them on demand up to Max and
// reusing them most-recently-used first (a warm instance already holds the
// current cycle's pod). It is safe for concurrent use.
type Pool[T any] struct {
	newFn   func(ctx context.Context) (T, error)
	closeFn func(T)
	max     int

	mu      sync.Mutex
	idle    []T
	size    int // objects in existence: idle + handed out + being created
	waiters []chan T
	closed  bool
	gets    uint64 // successful Gets, to tell whether the pool is still used
}

// New returns a pool creating objects with newFn and destroying them with
// closeFn; limit (at least 1) bounds how many exist at once.
func New[T any](limit int, newFn func(ctx context.Context) (T, error), closeFn func(T)) *Pool[T] {
	return &Pool[T]{newFn: newFn, closeFn: closeFn, max: max(limit, 1)}
}

// Seed adds an already created object to the idle set, counting toward Max.
func (p *Pool[T]) Seed(t T) {
	p.mu.Lock()
	p.size++
	p.mu.Unlock()
	p.Put(t, false)
}

// Get returns an idle object, creates one if fewer than Max exist, or waits
// for one to be returned. It fails when ctx ends, the pool closes, or
// creation fails.
func (p *Pool[T]) Get(ctx context.Context) (T, error) {
	var zero T
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return zero, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		t := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.gets++
		p.mu.Unlock()
		return t, nil
	}
	if p.size < p.max {
		p.size++
		p.gets++
		p.mu.Unlock()
		t, err := p.newFn(ctx)
		if err != nil {
			p.mu.Lock()
			p.size--
			p.wakeCreatorLocked()
			p.mu.Unlock()
			return zero, err
		}
		return t, nil
	}
	ch := make(chan T, 1)
	p.waiters = append(p.waiters, ch)
	p.mu.Unlock()
	select {
	case t, ok := <-ch:
		if !ok {
			return p.Get(ctx) // woken to create one, or closed
		}
		return t, nil
	case <-ctx.Done():
		p.mu.Lock()
		for i, w := range p.waiters {
			if w == ch {
				p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
				break
			}
		}
		p.mu.Unlock()
		// A Put may have handed us an object before we left the queue.
		select {
		case t, ok := <-ch:
			if ok {
				p.Put(t, false)
			} else {
				// We were woken to create one: pass that on.
				p.mu.Lock()
				p.wakeCreatorLocked()
				p.mu.Unlock()
			}
		default:
		}
		return zero, ctx.Err()
	}
}

// Put returns an object. A broken object is destroyed instead of reused,
// which frees room for a new one.
func (p *Pool[T]) Put(t T, broken bool) {
	p.mu.Lock()
	if broken || p.closed {
		p.size--
		p.wakeCreatorLocked()
		p.mu.Unlock()
		p.closeFn(t)
		return
	}
	if len(p.waiters) > 0 {
		// Handed over under the lock (the channel has room for it): a
		// waiter giving up takes the lock before it looks into its
		// channel, so it either finds the object there and puts it back,
		// or has left the queue before anyone picked it. Sent after the
		// unlock, an object could arrive after the waiter had looked and
		// left, and be lost for good.
		p.waiters[0] <- t
		p.waiters = p.waiters[1:]
		p.mu.Unlock()
		return
	}
	p.idle = append(p.idle, t)
	p.mu.Unlock()
}

// wakeCreatorLocked lets the first waiter create an object after one was
// destroyed or failed to be created.
func (p *Pool[T]) wakeCreatorLocked() {
	if len(p.waiters) > 0 {
		close(p.waiters[0])
		p.waiters = p.waiters[1:]
	}
}

// Usage returns how many Gets have succeeded and how many objects are
// handed out now: a pool whose Gets stop changing with nothing handed out
// is no longer used.
func (p *Pool[T]) Usage() (gets uint64, busy int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gets, p.size - len(p.idle)
}

// Max returns the bound on how many objects exist at once.
func (p *Pool[T]) Max() int { return p.max }

// Size returns how many objects exist.
func (p *Pool[T]) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.size
}

// Idle returns a snapshot of the idle objects, for inspection.
func (p *Pool[T]) Idle() []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]T(nil), p.idle...)
}

// Close destroys the idle objects and makes later Puts destroy theirs.
// Waiters fail with ErrClosed.
func (p *Pool[T]) Close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.size -= len(idle)
	for _, w := range p.waiters {
		close(w)
	}
	p.waiters = nil
	p.mu.Unlock()
	for _, t := range idle {
		p.closeFn(t)
	}
}
