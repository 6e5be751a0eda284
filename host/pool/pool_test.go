package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type obj struct{ id int }

func newCounting(max int) (*Pool[*obj], *atomic.Int32, *atomic.Int32) {
	var created, closed atomic.Int32
	p := New(max, func(context.Context) (*obj, error) {
		return &obj{id: int(created.Add(1))}, nil
	}, func(*obj) { closed.Add(1) })
	return p, &created, &closed
}

func TestReuseMostRecent(t *testing.T) {
	p, created, _ := newCounting(4)
	a, _ := p.Get(context.Background())
	b, _ := p.Get(context.Background())
	p.Put(a, false)
	p.Put(b, false)
	got, _ := p.Get(context.Background())
	if got != b {
		t.Fatalf("got object %d, want the most recently returned %d", got.id, b.id)
	}
	if created.Load() != 2 {
		t.Fatalf("created %d objects, want 2", created.Load())
	}
}

func TestBoundAndHandOff(t *testing.T) {
	p, created, _ := newCounting(2)
	ctx := context.Background()
	a, _ := p.Get(ctx)
	b, _ := p.Get(ctx)
	got := make(chan *obj)
	go func() {
		o, err := p.Get(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- o
	}()
	select {
	case <-got:
		t.Fatal("Get returned while the pool was exhausted")
	case <-time.After(50 * time.Millisecond):
	}
	p.Put(a, false)
	if o := <-got; o != a {
		t.Fatalf("waiter got %v, want the returned object", o)
	}
	p.Put(b, false)
	if created.Load() != 2 {
		t.Fatalf("created %d, want 2", created.Load())
	}
}

func TestBrokenIsReplaced(t *testing.T) {
	p, created, closed := newCounting(1)
	ctx := context.Background()
	a, _ := p.Get(ctx)
	waiter := make(chan *obj)
	go func() {
		o, _ := p.Get(ctx)
		waiter <- o
	}()
	time.Sleep(20 * time.Millisecond)
	p.Put(a, true)
	o := <-waiter
	if o == a || o.id != 2 {
		t.Fatalf("waiter got %v, want a fresh object", o)
	}
	if closed.Load() != 1 || created.Load() != 2 || p.Size() != 1 {
		t.Fatalf("closed=%d created=%d size=%d", closed.Load(), created.Load(), p.Size())
	}
}

func TestContextCancelWhileWaiting(t *testing.T) {
	p, _, _ := newCounting(1)
	a, _ := p.Get(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := p.Get(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	p.Put(a, false)
	if b, err := p.Get(context.Background()); err != nil || b != a {
		t.Fatalf("after cancel: %v %v", b, err)
	}
}

func TestCreateFailureFreesSlot(t *testing.T) {
	fail := true
	p := New(1, func(context.Context) (*obj, error) {
		if fail {
			return nil, errors.New("boom")
		}
		return &obj{}, nil
	}, func(*obj) {})
	if _, err := p.Get(context.Background()); err == nil || err.Error() != "boom" {
		t.Fatalf("err = %v", err)
	}
	fail = false
	if _, err := p.Get(context.Background()); err != nil {
		t.Fatalf("slot not freed: %v", err)
	}
}

func TestCloseDestroysAndFailsWaiters(t *testing.T) {
	p, _, closed := newCounting(1)
	a, _ := p.Get(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := p.Get(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("waiter err = %v, want ErrClosed", err)
		}
	}()
	time.Sleep(20 * time.Millisecond)
	p.Close()
	wg.Wait()
	p.Put(a, false)
	if closed.Load() != 1 || p.Size() != 0 {
		t.Fatalf("closed=%d size=%d", closed.Load(), p.Size())
	}
}

func TestConcurrentNeverShares(t *testing.T) {
	p, _, _ := newCounting(3)
	var inUse sync.Map
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				o, err := p.Get(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if _, dup := inUse.LoadOrStore(o, true); dup {
					t.Error("object handed to two callers")
				}
				inUse.Delete(o)
				p.Put(o, i%500 == 0)
			}
		}()
	}
	wg.Wait()
	if p.Size() > 3 {
		t.Fatalf("size %d exceeds max", p.Size())
	}
}

// Callers that give up waiting (the scheduler cancels the Filter calls
// still queued once it has enough nodes) must never lose an object: one
// handed to a waiter as it gives up goes back to the pool. A lost object
// still counts toward Max, so the pool would shrink until every caller
// waits forever.
func TestCancelledWaitersLoseNothing(t *testing.T) {
	p, created, _ := newCounting(2)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3000; i++ {
				ctx, cancel := context.WithCancel(context.Background())
				if (g+i)%3 == 0 {
					cancel() // some give up at once, some while queued
				} else {
					go cancel()
				}
				o, err := p.Get(ctx)
				cancel()
				if err != nil {
					continue
				}
				p.Put(o, false)
			}
		}()
	}
	wg.Wait()
	// Whether the storm ever needed the second object depends on how the
	// goroutines were scheduled (on a loaded machine they may never
	// overlap); that none was lost does not.
	if idle := len(p.Idle()); idle != p.Size() || created.Load() > 2 {
		t.Fatalf("%d idle of %d objects (%d created): objects were lost", idle, p.Size(), created.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 2 {
		if _, err := p.Get(ctx); err != nil {
			t.Fatalf("Get after the storm: %v", err)
		}
	}
}
