package groups

import (
	"bytes"
	"compress/flate"
	"sync"

	"github.com/mochi-mqtt/server/v2/packets"
)

// EncodingProperty is the MQTT 5 user property of a resume's SUBSCRIBE
// (beside ResumeProperty) that asks for the reply in a compressed
// encoding: EncodingDeflate, the one known. Without it, or with another
// value (counted: ResumeStats.UnknownEncoding), the reply is plain JSON.
const EncodingProperty = "encoding"

// EncodingDeflate is raw DEFLATE (RFC 1951, no zlib or gzip header) of the
// JSON the reply would be: what a resume may ask for (EncodingProperty),
// and what its reply then says it is (ContentEncodingProperty).
const EncodingDeflate = "deflate"

// ContentEncodingProperty is the MQTT 5 user property of a PUBLISH whose
// payload is encoded (value EncodingDeflate): a resume's reply, to that
// subscriber only. Every other group message is plain JSON without it.
const ContentEncodingProperty = "content-encoding"

// deflateLevel is the compression level of a resume's reply: the
// default. flate.BestCompression makes a 100-change delta 3 % smaller
// (821 bytes instead of 845 in TestGroupResume) at twice the CPU (79 µs
// instead of 37), and a 10,000-member snapshot (a fallback) 3 % smaller
// at 7.6 times the CPU (12.6 ms instead of 1.7 ms, inside the fence):
// BenchmarkDeflateReply, BenchmarkDeflateSnapshot; docs/groups.md.
const deflateLevel = flate.DefaultCompression

// deflaters are the flate writers of the replies, reused (one is about
// 1 MB of state to make anew).
var deflaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, deflateLevel) // the level is valid: no error
	return w
}}

// deflate returns b in raw DEFLATE, and false if that is not smaller
// than b (the reply is then sent as it is).
func deflate(b []byte) ([]byte, bool) {
	var out bytes.Buffer
	out.Grow(len(b) / 4)
	w := deflaters.Get().(*flate.Writer)
	defer deflaters.Put(w)
	w.Reset(&out)
	if _, err := w.Write(b); err != nil {
		return nil, false
	}
	if err := w.Close(); err != nil {
		return nil, false
	}
	if out.Len() >= len(b) {
		return nil, false
	}
	return out.Bytes(), true
}

// deflatedProps are the properties of a reply in raw DEFLATE: not UTF-8
// (payload format 0), JSON once inflated, and its content encoding.
func deflatedProps() packets.Properties {
	return packets.Properties{
		PayloadFormat:     0,
		PayloadFormatFlag: true,
		ContentType:       "application/json",
		User:              []packets.UserProperty{{Key: ContentEncodingProperty, Val: EncodingDeflate}},
	}
}
