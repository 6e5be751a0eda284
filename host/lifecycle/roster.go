package lifecycle

// Roster is the policies of a profile at one moment, in order, with the
// shadow beside each enforcing policy that has one. It is never changed
// once published: a change publishes a new one (Lifecycle.Roster).
type Roster struct {
	Slots []*Slot
	// Shadows maps an enforcing policy's slot to its shadow's.
	Shadows map[*Slot]*Slot
	// Blocked are required policies that cannot serve: while any is,
	// pods are refused with its reason.
	Blocked []Blocker
}

// Blocker is a required policy without a version, and why.
type Blocker struct {
	Name, Reason string
}

// NewRoster is the roster of slots, in order, with the shadows they
// declare paired with their enforcing policies. The lifecycle makes its
// own; tests and tools make fixed ones (NewFixedSlot).
func NewRoster(slots []*Slot, blocked []Blocker) *Roster {
	r := &Roster{Slots: slots, Shadows: map[*Slot]*Slot{}, Blocked: blocked}
	for _, sh := range slots {
		a := sh.Args()
		if a.Mode != ModeShadow {
			continue
		}
		for _, e := range slots {
			if e.Name() == a.Shadows && e.Args().Mode != ModeShadow {
				r.Shadows[e] = sh
			}
		}
	}
	return r
}

// Slot returns the slot of the policy called name, or nil when it is not
// in the roster.
func (r *Roster) Slot(name string) *Slot {
	for _, s := range r.Slots {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

func sameBlockers(a, b *Roster) bool {
	if a == nil || len(a.Blocked) != len(b.Blocked) {
		return false
	}
	for i := range a.Blocked {
		if a.Blocked[i] != b.Blocked[i] {
			return false
		}
	}
	return true
}
