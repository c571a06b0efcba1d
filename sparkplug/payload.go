package sparkplug

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// ErrMalformed is a payload that is not a Sparkplug B payload the server
// can read: bad protobuf framing, or a known field of the wrong wire type.
var ErrMalformed = errors.New("sparkplug: malformed payload")

// BdSeqMetric is the name of the metric that carries the birth/death
// sequence number in NBIRTH and NDEATH.
const BdSeqMetric = "bdSeq"

// The Sparkplug B data types of the integers (sparkplug_b.proto's
// DataType); bdSeq is an Int64 in Sparkplug 3.0, a UInt64 in some earlier
// clients.
const (
	TypeInt8   = 1
	TypeInt16  = 2
	TypeInt32  = 3
	TypeInt64  = 4
	TypeUInt8  = 5
	TypeUInt16 = 6
	TypeUInt32 = 7
	TypeUInt64 = 8
)

// The field numbers of sparkplug_b.proto that the decoder reads; every
// other field is skipped.
const (
	fieldPayloadTimestamp = 1
	fieldPayloadMetrics   = 2
	fieldPayloadSeq       = 3

	fieldMetricName      = 1
	fieldMetricAlias     = 2
	fieldMetricTimestamp = 3
	fieldMetricDatatype  = 4
	fieldMetricIsNull    = 7
	fieldMetricInt       = 10
	fieldMetricLong      = 11
)

// Payload is what the server reads of a Sparkplug B payload (the
// org.eclipse.tahu.protobuf.Payload message): its timestamp and seq, how
// many metrics it has, and the bdSeq metric's value.
type Payload struct {
	Timestamp uint64 // ms since the Unix epoch, UTC; 0: absent
	Seq       uint64
	HasSeq    bool
	Metrics   int
	BdSeq     uint64 // the bdSeq metric's value, as sent (an Int64 as its two's complement)
	HasBdSeq  bool
}

// Metric is what the decoder reads of one metric.
type Metric struct {
	Name      string
	Alias     uint64
	Timestamp uint64
	Datatype  uint32
	Value     uint64 // int_value or long_value
	HasValue  bool
	IsNull    bool
}

// bdSeq reports the metric's value as a bdSeq: named bdSeq, of an integer
// data type (or none given), with a value.
func (m Metric) bdSeq() (uint64, bool) {
	if m.Name != BdSeqMetric || m.IsNull || !m.HasValue || m.Datatype > TypeUInt64 {
		return 0, false
	}
	return m.Value, true
}

// Decode reads a Sparkplug B payload. It never panics and allocates only
// the metric names it compares; a malformed payload is ErrMalformed.
func Decode(b []byte) (Payload, error) {
	var p Payload
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return p, malformed("tag", n)
		}
		b = b[n:]
		switch num {
		case fieldPayloadTimestamp, fieldPayloadSeq:
			if typ != protowire.VarintType {
				return p, fmt.Errorf("%w: field %d: wire type %d", ErrMalformed, num, typ)
			}
			var v uint64
			if v, n = protowire.ConsumeVarint(b); n < 0 {
				return p, malformed("varint", n)
			}
			if num == fieldPayloadTimestamp {
				p.Timestamp = v
			} else {
				p.Seq, p.HasSeq = v, true
			}
		case fieldPayloadMetrics:
			if typ != protowire.BytesType {
				return p, fmt.Errorf("%w: metrics: wire type %d", ErrMalformed, typ)
			}
			var v []byte
			if v, n = protowire.ConsumeBytes(b); n < 0 {
				return p, malformed("metric", n)
			}
			m, err := DecodeMetric(v)
			if err != nil {
				return p, err
			}
			p.Metrics++
			if s, ok := m.bdSeq(); ok {
				p.BdSeq, p.HasBdSeq = s, true
			}
		default:
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return p, malformed("field", n)
			}
		}
		b = b[n:]
	}
	return p, nil
}

// DecodeMetric reads one Payload.Metric message.
func DecodeMetric(b []byte) (Metric, error) {
	var m Metric
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return m, malformed("metric tag", n)
		}
		b = b[n:]
		switch num {
		case fieldMetricName:
			if typ != protowire.BytesType {
				return m, fmt.Errorf("%w: metric name: wire type %d", ErrMalformed, typ)
			}
			var v []byte
			if v, n = protowire.ConsumeBytes(b); n < 0 {
				return m, malformed("metric name", n)
			}
			m.Name = string(v)
		case fieldMetricAlias, fieldMetricTimestamp, fieldMetricDatatype, fieldMetricIsNull, fieldMetricInt, fieldMetricLong:
			if typ != protowire.VarintType {
				return m, fmt.Errorf("%w: metric field %d: wire type %d", ErrMalformed, num, typ)
			}
			var v uint64
			if v, n = protowire.ConsumeVarint(b); n < 0 {
				return m, malformed("metric varint", n)
			}
			switch num {
			case fieldMetricAlias:
				m.Alias = v
			case fieldMetricTimestamp:
				m.Timestamp = v
			case fieldMetricDatatype:
				m.Datatype = uint32(v)
			case fieldMetricIsNull:
				m.IsNull = v != 0
			case fieldMetricInt:
				m.Value, m.HasValue = uint64(uint32(v)), true
			case fieldMetricLong:
				m.Value, m.HasValue = v, true
			}
		default:
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return m, malformed("metric field", n)
			}
		}
		b = b[n:]
	}
	return m, nil
}

// malformed wraps protowire's error code as ErrMalformed.
func malformed(what string, n int) error {
	return fmt.Errorf("%w: %s: %v", ErrMalformed, what, protowire.ParseError(n))
}
