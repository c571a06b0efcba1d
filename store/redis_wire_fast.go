package store

import "encoding/json"

// The change feed's fast path. Every node decodes every change it listens
// to, and with encoding/json that was 9 % of a node's CPU at 5,000 changes/s
// (a CPU profile of the churn scenario): most of it finding the ends of the
// session lists twice (once as json.RawMessage, once decoding them). The
// messages common.lua writes have one shape (cjson: no whitespace, keys and
// strings without escapes, integers), so fastChange reads that shape by
// hand, in one pass, and gives up on anything else: an escape, a byte
// outside printable ASCII, whitespace, null, a float, a key it does not
// know. What it gives up on is decoded by encoding/json as before, so that
// a message means the same either way; FuzzFastChange holds the two equal.

// fastChange decodes b into w, the session lists already decoded (views,
// xs, and fast set), and reports whether it could; when it could not,
// w is garbage and the caller decodes b with encoding/json.
func fastChange(b []byte, w *wireChange) bool {
	s := scan{b: b}
	views, ended := &w.views, &w.xs
	w.fast = true
	ok := s.object(func(k string) bool {
		switch k {
		case "u":
			return s.str(&w.U)
		case "v":
			return s.str(&w.V)
		case "st":
			return s.str(&w.St)
		case "tx":
			return s.str(&w.Tx)
		case "since":
			return s.str(&w.Since)
		case "ls":
			return s.str(&w.Ls)
		case "r":
			return s.str(&w.R)
		case "rs":
			return s.str(&w.Rs)
		case "nx":
			return s.str(&w.Nx)
		case "wd":
			var d string
			if !s.str(&d) || !digits(d) {
				return false
			}
			w.Wd = json.Number(d)
			return true
		case "ss":
			*views = (*views)[:0]
			return s.list(func() bool {
				var v wireView
				if !s.object(func(k string) bool { return s.view(k, &v) }) {
					return false
				}
				*views = append(*views, v)
				return true
			})
		case "x":
			*ended = (*ended)[:0]
			return s.list(func() bool {
				var x wireEnded
				if !s.object(func(k string) bool {
					switch k {
					case "r":
						return s.str(&x.R)
					case "ea":
						return s.str(&x.Ea)
					}
					return s.view(k, &x.wireView)
				}) {
					return false
				}
				*ended = append(*ended, x)
				return true
			})
		case "pv":
			if w.Pv == nil { // a key twice: encoding/json fills the same
				w.Pv = &wirePrivacy{}
			}
			pv := w.Pv
			return s.object(func(k string) bool {
				switch k {
				case "i":
					return s.str(&pv.I)
				case "m":
					return s.str(&pv.M)
				case "d":
					return s.str(&pv.D)
				case "e":
					return s.str(&pv.E)
				}
				return false
			})
		}
		return false
	})
	return ok && s.i == len(b)
}

// scan reads the JSON common.lua writes, from b at i.
type scan struct {
	b []byte
	i int
}

func (s *scan) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes into v.
func (s *scan) str(v *string) bool {
	if !s.eat('"') {
		return false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			*v = string(s.b[start:s.i])
			s.i++
			return true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return false
		}
	}
	return false
}

// uint reads a non-negative integer of at most max (no sign, no leading
// zero, no fraction or exponent).
func (s *scan) uint(max uint64) (uint64, bool) {
	start := s.i
	var n uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if s.i-start == 18 {
			return 0, false
		}
		n = n*10 + uint64(s.b[s.i]-'0')
		s.i++
	}
	if s.i == start || (s.b[start] == '0' && s.i-start > 1) || n > max {
		return 0, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, false
	}
	return n, true
}

// object reads an object, handing each key to field, which reads its value.
func (s *scan) object(field func(k string) bool) bool {
	if !s.eat('{') {
		return false
	}
	if s.eat('}') {
		return true
	}
	for {
		var k string
		if !s.str(&k) || !s.eat(':') || !field(k) {
			return false
		}
		if s.eat('}') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// list reads an array, each element with elem; cjson writes an empty
// array as {} (and never []: left to encoding/json).
func (s *scan) list(elem func() bool) bool {
	if s.eat('{') {
		return s.eat('}')
	}
	if !s.eat('[') {
		return false
	}
	for {
		if !elem() {
			return false
		}
		if s.eat(']') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// view reads field k of a session's view.
func (s *scan) view(k string, v *wireView) bool {
	switch k {
	case "id":
		return s.str(&v.ID)
	case "e":
		return s.str(&v.E)
	case "n":
		return s.str(&v.N)
	case "d":
		return s.str(&v.D)
	case "st":
		return s.str(&v.St)
	case "c":
		return s.str(&v.C)
	case "un":
		return s.str(&v.Un)
	case "ip":
		return s.str(&v.IP)
	case "l":
		return s.str(&v.L)
	case "cs":
		switch {
		case s.lit("true"):
			v.Cs = true
		case s.lit("false"):
			v.Cs = false
		default:
			return false
		}
		return true
	case "pt":
		n, ok := s.uint(1<<31 - 1)
		v.Pt = int(n)
		return ok
	case "pv":
		n, ok := s.uint(1<<8 - 1)
		v.Pv = uint8(n)
		return ok
	case "ka":
		n, ok := s.uint(1<<16 - 1)
		v.Ka = uint16(n)
		return ok
	case "se":
		n, ok := s.uint(1<<32 - 1)
		v.Se = uint32(n)
		return ok
	}
	return false
}

func (s *scan) lit(l string) bool {
	if len(s.b)-s.i >= len(l) && string(s.b[s.i:s.i+len(l)]) == l {
		s.i += len(l)
		return true
	}
	return false
}

// digits: a JSON integer without sign, as json.Number takes it from a
// string.
func digits(d string) bool {
	if d == "" || (d[0] == '0' && len(d) > 1) {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}
