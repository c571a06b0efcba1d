package listener

import (
	"bytes"
	"testing"
)

// connect5 is an MQTT 5 CONNECT (client id "c") with props as its
// properties.
func connect5(props ...byte) []byte {
	body := []byte{0, 4, 'M', 'Q', 'T', 'T', 5, 0x02, 0, 30}
	body = append(body, byte(len(props)))
	body = append(body, props...)
	body = append(body, 0, 1, 'c')
	return append([]byte{0x10, byte(len(body))}, body...)
}

func TestSniffConnect(t *testing.T) {
	user := []byte{0x26, 0, 1, 'k', 0, 2, 'v', 'v'}
	cases := []struct {
		name string
		in   []byte
		want sniff
	}{
		{"no properties", connect5(), sniffDone},
		{"receive maximum 0", connect5(0x21, 0, 0), sniffZero},
		{"receive maximum 1", connect5(0x21, 0, 1), sniffDone},
		{"receive maximum 256", connect5(0x21, 1, 0), sniffDone},
		{"0 after others", connect5(append(append([]byte{0x11, 0, 0, 0, 10, 0x17, 1, 0x27, 0, 0, 1, 0}, user...), 0x21, 0, 0)...), sniffZero},
		{"0 after auth method and data", connect5(0x15, 0, 2, 'm', 'x', 0x16, 0, 1, 9, 0x21, 0, 0), sniffZero},
		{"MQTT 3.1.1", []byte{0x10, 12, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 30, 0, 1, 'c'}, sniffDone},
		{"not a CONNECT", []byte{0x30, 3, 0, 1, 'a'}, sniffDone},
		{"TLS record", []byte{0x16, 3, 1, 0, 200}, sniffDone},
		{"unknown property", connect5(0x01, 0, 0x21, 0, 0), sniffDone},
		{"property over its length", append([]byte{0x10, 14, 0, 4, 'M', 'Q', 'T', 'T', 5, 2, 0, 30, 2, 0x21, 0, 0}, 0, 1, 'c'), sniffDone},
		{"malformed length", []byte{0x10, 0xFF, 0xFF, 0xFF, 0xFF, 1}, sniffDone},
		{"empty", nil, sniffMore},
		{"header only", []byte{0x10, 0x80}, sniffMore},
		{"cut in the properties", connect5(0x21, 0, 0)[:14], sniffMore},
	}
	for _, c := range cases {
		if got := sniffConnect(c.in); got != c.want {
			t.Errorf("%s: %x: got %d, want %d", c.name, c.in, got, c.want)
		}
	}
}

// TestSnifferAcrossReads: a CONNECT that arrives a byte at a time is
// judged as a whole one; past sniffLimit the sniffer gives up.
func TestSnifferAcrossReads(t *testing.T) {
	in := connect5(0x11, 0, 0, 0, 10, 0x21, 0, 0)
	var s connectSniffer
	got := sniffMore
	for i := 0; i < len(in) && got == sniffMore; i++ {
		got = s.feed(in[i : i+1])
	}
	if got != sniffZero {
		t.Fatalf("byte by byte: got %d, want sniffZero", got)
	}

	var big []byte // user properties filling more than sniffLimit
	for len(big) < sniffLimit {
		big = append(big, 0x26, 0, 1, 'k', 0, 200)
		big = append(big, bytes.Repeat([]byte{'v'}, 200)...)
	}
	s = connectSniffer{}
	head := []byte{0x10, 0xFF, 0xFF, 0x03, 0, 4, 'M', 'Q', 'T', 'T', 5, 2, 0, 30, 0xFF, 0xFF, 0x01}
	if r := s.feed(head); r != sniffMore {
		t.Fatalf("head: %d, want sniffMore", r)
	}
	r := sniffMore
	for i := 0; i < len(big) && r == sniffMore; i += 512 {
		r = s.feed(big[i:min(i+512, len(big))])
	}
	if r != sniffDone || s.buf != nil {
		t.Fatalf("over the limit: %d (kept %d bytes), want sniffDone and nothing kept", r, len(s.buf))
	}
}
