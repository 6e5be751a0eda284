package guest

// A synced node is read straight from its encoding into the view's flat
// index (RATIONALE.md, "Why a synced node is indexed from its encoding"):
// decoding it first made some forty objects a node, which the view then
// dropped, and that was most of what an instance spent taking its nodes.

// fieldReader walks the fields of one protobuf message inside b, from pos
// to end; offsets are into b, so that nested messages are read in place.
type fieldReader struct {
	b        []byte
	pos, end int
	// The field read last: its number and wire type; a varint's value; a
	// length-delimited field's payload as b[off:off+n].
	num, typ uint64
	val      uint64
	off, n   int
}

// next reads the next field: false at the end of the message, an error when
// it is malformed.
func (r *fieldReader) next() (bool, error) {
	if r.pos >= r.end {
		return false, nil
	}
	tag, k := uvarint(r.b[r.pos:r.end])
	if k <= 0 {
		return false, errorString("bad field tag")
	}
	r.pos += k
	r.num, r.typ = tag>>3, tag&7
	if r.num == 0 {
		return false, errorString("bad field number")
	}
	switch r.typ {
	case 0:
		v, k := uvarint(r.b[r.pos:r.end])
		if k <= 0 {
			return false, errorString("bad varint")
		}
		r.val, r.pos = v, r.pos+k
	case 1, 5:
		size := 8
		if r.typ == 5 {
			size = 4
		}
		if r.end-r.pos < size {
			return false, errorString("truncated field")
		}
		r.pos += size
	case 2:
		l, k := uvarint(r.b[r.pos:r.end])
		if k <= 0 || l > uint64(r.end-r.pos-k) {
			return false, errorString("bad length")
		}
		r.off, r.n = r.pos+k, int(l)
		r.pos = r.off + r.n
	default:
		return false, errorString("bad wire type")
	}
	return true, nil
}

// inner returns a reader of the length-delimited field just read.
func (r *fieldReader) inner() fieldReader {
	return fieldReader{b: r.b, pos: r.off, end: r.off + r.n}
}

// spanOf is the payload just read as a span of b.
func (r *fieldReader) spanOf() span { return span{off: uint32(r.off), len: uint32(r.n)} }

// Field numbers and wire types the index reads (abi/v1/policy.proto).
const (
	wireVarint = 0
	wireBytes  = 2

	nodeInfoHandle     = 1 // NodeInfo
	nodeInfoGeneration = 2
	nodeInfoNode       = 3
	nodeInfoRequested  = 4
	nodeInfoPodCount   = 5

	nodeName        = 1 // Node
	nodeLabels      = 2
	nodeAllocatable = 5

	resourcesMilliCPU  = 1 // Resources
	resourcesMemory    = 2
	resourcesEphemeral = 3
	resourcesPods      = 4
	resourcesScalars   = 5

	pairKey   = 1 // KeyValue, and Scalar's name
	pairValue = 2 // KeyValue's value, and Scalar's value
)

// wants reports whether the field just read has wire type typ; a field of a
// known number with another type is left to the generated decoder.
func (r *fieldReader) wants(typ uint64) bool { return r.typ == typ }

// indexNode makes the view of a node from its encoding raw (a NodeInfo
// message, owned by the view from now on) without decoding it: the
// index's strings are spans of raw itself. ok is false for an encoding
// this reader leaves to the generated decoder (a known field with another
// wire type, a singular message twice, which protobuf merges); err is set
// when the reader finds raw malformed, and the caller then leaves it to the
// decoder too, which has the last word (it skips groups, which this reader
// calls malformed).
func indexNode(raw []byte) (n *NodeInfo, ok bool, err error) {
	var (
		handle, podCount int32
		generation       int64
		node, requested  fieldReader
		haveNode, haveRq bool
	)
	r := fieldReader{b: raw, end: len(raw)}
	for {
		more, err := r.next()
		if err != nil {
			return nil, false, err
		}
		if !more {
			break
		}
		switch r.num {
		case nodeInfoHandle, nodeInfoGeneration, nodeInfoPodCount:
			if !r.wants(wireVarint) {
				return nil, false, nil
			}
			switch r.num {
			case nodeInfoHandle:
				handle = int32(r.val)
			case nodeInfoGeneration:
				generation = int64(r.val)
			default:
				podCount = int32(r.val)
			}
		case nodeInfoNode, nodeInfoRequested:
			if !r.wants(wireBytes) || (r.num == nodeInfoNode && haveNode) || (r.num == nodeInfoRequested && haveRq) {
				return nil, false, nil
			}
			if r.num == nodeInfoNode {
				node, haveNode = r.inner(), true
			} else {
				requested, haveRq = r.inner(), true
			}
		}
	}
	n = &NodeInfo{raw: raw, handle: handle}
	x := &n.index
	x.generation, x.podCount = generation, podCount
	x.text = raw[:len(raw):len(raw)]

	// The node: its name, labels and allocatable amounts. The labels are
	// counted first, so that their list is allocated once.
	var (
		labels, alloc fieldReader
		nLabels       int
		haveAlloc     bool
	)
	if haveNode {
		labels = node
		for {
			more, err := node.next()
			if err != nil {
				return nil, false, err
			}
			if !more {
				break
			}
			switch node.num {
			case nodeName:
				if !node.wants(wireBytes) {
					return nil, false, nil
				}
				x.name = node.spanOf()
			case nodeLabels:
				if !node.wants(wireBytes) {
					return nil, false, nil
				}
				nLabels++
			case nodeAllocatable:
				if !node.wants(wireBytes) || haveAlloc {
					return nil, false, nil
				}
				alloc, haveAlloc = node.inner(), true
			}
		}
	}
	if nLabels > 0 {
		x.labels = make([]label, 0, nLabels)
		for {
			more, _ := labels.next() // read whole above
			if !more {
				break
			}
			if labels.num != nodeLabels {
				continue
			}
			var l label
			kv := labels.inner()
			for {
				more, err := kv.next()
				if err != nil {
					return nil, false, err
				}
				if !more {
					break
				}
				if kv.num != pairKey && kv.num != pairValue {
					continue
				}
				if !kv.wants(wireBytes) {
					return nil, false, nil
				}
				if kv.num == pairKey {
					l.key = kv.spanOf()
				} else {
					l.value = kv.spanOf()
				}
			}
			x.labels = append(x.labels, l)
		}
		x.sortLabels()
	}

	// Allocatable, then requested: amounts and scalars, as newNodeInfo
	// takes them from the message.
	nAlloc, err := countScalars(alloc)
	if err != nil || nAlloc < 0 {
		return nil, false, err
	}
	nReq, err := countScalars(requested)
	if err != nil || nReq < 0 {
		return nil, false, err
	}
	nScalars := nAlloc + nReq
	if nScalars > 0 {
		x.scalars = make([]scalarAmount, 0, nScalars)
	}
	if ok, err = x.readResources(alloc, &x.alloc, false); !ok || err != nil {
		return nil, ok, err
	}
	if ok, err = x.readResources(requested, &x.req, true); !ok || err != nil {
		return nil, ok, err
	}
	if nScalars > 0 {
		x.sortScalars()
	}
	x.built = true
	return n, true, nil
}

// countScalars counts the scalars of a Resources message (r unread); -1
// when the message has a shape left to the generated decoder.
func countScalars(r fieldReader) (int, error) {
	c := 0
	for {
		more, err := r.next()
		if err != nil || !more {
			return c, err
		}
		if r.num == resourcesScalars {
			if !r.wants(wireBytes) {
				return -1, nil
			}
			c++
		}
	}
}

// readResources reads a Resources message (r unread) into amounts and the
// index's scalars: allocatable ones appended, requested ones set on the
// allocatable scalar of that name or appended.
func (x *nodeIndex) readResources(r fieldReader, amounts *[4]int64, requested bool) (bool, error) {
	for {
		more, err := r.next()
		if err != nil || !more {
			return err == nil, err
		}
		switch r.num {
		case resourcesMilliCPU, resourcesMemory, resourcesEphemeral, resourcesPods:
			if !r.wants(wireVarint) {
				return false, nil
			}
			amounts[r.num-resourcesMilliCPU] = int64(r.val)
		case resourcesScalars:
			var (
				s     scalarAmount
				value int64
			)
			sc := r.inner()
			for {
				more, err := sc.next()
				if err != nil {
					return false, err
				}
				if !more {
					break
				}
				switch sc.num {
				case pairKey:
					if !sc.wants(wireBytes) {
						return false, nil
					}
					s.name = sc.spanOf()
				case pairValue:
					if !sc.wants(wireVarint) {
						return false, nil
					}
					value = int64(sc.val)
				}
			}
			if !requested {
				s.alloc = value
				x.scalars = append(x.scalars, s)
				continue
			}
			if i := x.findScalar(x.str(s.name)); i >= 0 {
				x.scalars[i].req = value
				continue
			}
			s.req = value
			x.scalars = append(x.scalars, s)
		}
	}
}
