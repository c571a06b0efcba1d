package sparkplug

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// metric is one metric of a test payload, encoded as sparkplug_b.proto's
// Payload.Metric.
type metric struct {
	name     string
	alias    uint64
	ts       uint64
	datatype uint64
	long     *uint64
	int32v   *uint64
	str      string // string_value (field 15)
	isNull   bool
}

func u(v uint64) *uint64 { return &v }

func (m metric) encode() []byte {
	var b []byte
	if m.name != "" {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, m.name)
	}
	if m.alias != 0 {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, m.alias)
	}
	if m.ts != 0 {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, m.ts)
	}
	if m.datatype != 0 {
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, m.datatype)
	}
	if m.isNull {
		b = protowire.AppendTag(b, 7, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if m.int32v != nil {
		b = protowire.AppendTag(b, 10, protowire.VarintType)
		b = protowire.AppendVarint(b, *m.int32v)
	}
	if m.long != nil {
		b = protowire.AppendTag(b, 11, protowire.VarintType)
		b = protowire.AppendVarint(b, *m.long)
	}
	if m.str != "" {
		b = protowire.AppendTag(b, 15, protowire.BytesType)
		b = protowire.AppendString(b, m.str)
	}
	return b
}

// payload encodes a Sparkplug B payload: timestamp, metrics, seq (when
// not nil), and a uuid and a body, which the decoder skips.
func payload(ts uint64, seq *uint64, ms ...metric) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, ts)
	for _, m := range ms {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, m.encode())
	}
	if seq != nil {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, *seq)
	}
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendString(b, "uuid-1")
	b = protowire.AppendTag(b, 5, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte{0, 1, 2})
	return b
}

// nbirth is an edge node's birth as Sparkplug 3.0 has it: bdSeq an Int64,
// seq 0, Node Control/Rebirth false, and a data metric.
func nbirth(bdSeq uint64) []byte {
	return payload(1700000000000, u(0),
		metric{name: "bdSeq", datatype: TypeInt64, long: u(bdSeq), ts: 1700000000000},
		metric{name: "Node Control/Rebirth", datatype: 11, ts: 1700000000000},
		metric{name: "Temperature", alias: 7, datatype: 10, ts: 1700000000000})
}

// ndeath is an edge node's death: a timestamp and bdSeq, no seq.
func ndeath(bdSeq uint64) []byte {
	return payload(1700000000000, nil, metric{name: "bdSeq", datatype: TypeInt64, long: u(bdSeq)})
}

func TestDecode(t *testing.T) {
	neg := uint64(1<<64 - 1) // Int64 -1, as sent
	for _, c := range []struct {
		name    string
		in      []byte
		want    Payload
		wantErr bool
	}{
		{"empty", nil, Payload{}, false},
		{"nbirth", nbirth(3), Payload{Timestamp: 1700000000000, HasSeq: true, Metrics: 3, BdSeq: 3, HasBdSeq: true}, false},
		{"ndeath", ndeath(255), Payload{Timestamp: 1700000000000, Metrics: 1, BdSeq: 255, HasBdSeq: true}, false},
		{"uint64 bdSeq", payload(5, nil, metric{name: "bdSeq", datatype: TypeUInt64, long: u(9)}),
			Payload{Timestamp: 5, Metrics: 1, BdSeq: 9, HasBdSeq: true}, false},
		{"int_value bdSeq", payload(5, nil, metric{name: "bdSeq", datatype: TypeInt32, int32v: u(4)}),
			Payload{Timestamp: 5, Metrics: 1, BdSeq: 4, HasBdSeq: true}, false},
		{"negative Int64 kept as sent", payload(5, nil, metric{name: "bdSeq", datatype: TypeInt64, long: &neg}),
			Payload{Timestamp: 5, Metrics: 1, BdSeq: neg, HasBdSeq: true}, false},
		{"bdSeq null", payload(5, nil, metric{name: "bdSeq", datatype: TypeInt64, isNull: true}),
			Payload{Timestamp: 5, Metrics: 1}, false},
		{"bdSeq a string", payload(5, nil, metric{name: "bdSeq", datatype: 12, str: "1"}),
			Payload{Timestamp: 5, Metrics: 1}, false},
		{"bdSeq by alias only", payload(5, nil, metric{alias: 1, datatype: TypeInt64, long: u(1)}),
			Payload{Timestamp: 5, Metrics: 1}, false},
		{"truncated", nbirth(1)[:10], Payload{}, true},
		{"timestamp as bytes", []byte{0x0a, 0x01, 0x00}, Payload{}, true},
		{"bad varint", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, Payload{}, true},
		{"field 0", []byte{0x00, 0x00}, Payload{}, true},
		{"metric name as varint", []byte{0x12, 0x02, 0x08, 0x01}, Payload{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode(c.in)
			if c.wantErr {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err %v, want ErrMalformed", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Decode = %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// FuzzDecodePayload: any input decodes or is ErrMalformed, never a panic,
// and a decoded bdSeq came from a metric named bdSeq.
func FuzzDecodePayload(f *testing.F) {
	for _, seed := range [][]byte{nbirth(0), nbirth(255), ndeath(1), payload(1, nil),
		payload(2, u(7), metric{name: "bdSeq", datatype: TypeUInt64, long: u(3)}, metric{name: "x", str: "y"}),
		{0x12, 0x02, 0x08, 0x01}, nil} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		if p.Metrics < 0 || (p.HasBdSeq && p.Metrics == 0) {
			t.Fatalf("bdSeq without a metric: %+v", p)
		}
	})
}

func TestParseTopic(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Topic
		ok   bool
	}{
		{"spBv1.0/G/NBIRTH/E", Topic{"G", "NBIRTH", "E", ""}, true},
		{"spBv1.0/G/NDEATH/E", Topic{"G", "NDEATH", "E", ""}, true},
		{"spBv1.0/G/DBIRTH/E/D", Topic{"G", "DBIRTH", "E", "D"}, true},
		{"spBv1.0/G/DDEATH/E/D", Topic{"G", "DDEATH", "E", "D"}, true},
		{"spBv1.0/G/NBIRTH/E/D", Topic{}, false},
		{"spBv1.0/G/DBIRTH/E", Topic{}, false},
		{"spBv1.0/G/DBIRTH/E/D/x", Topic{}, false},
		{"spBv1.0/STATE/host", Topic{}, false},
		{"spBv1.0//NBIRTH/E", Topic{}, false},
		{"spBv1.0/G/NBIRTH/", Topic{}, false},
		{"spAv1.0/G/NBIRTH/E", Topic{}, false},
		{"$sparkplug/certificates/spBv1.0/G/NBIRTH/E", Topic{}, false},
	} {
		got, ok := ParseTopic(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("ParseTopic(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if got := CertificateTopic("spBv1.0/G/NBIRTH/E"); got != "$sparkplug/certificates/spBv1.0/G/NBIRTH/E" {
		t.Errorf("CertificateTopic = %q", got)
	}
}
