package sparkplug

import "strings"

// Namespace is the first level of every Sparkplug B topic.
const Namespace = "spBv1.0"

// CertificatesPrefix is where a Sparkplug aware server keeps the births:
// $sparkplug/certificates/spBv1.0/{group}/NBIRTH/{edge} and
// .../DBIRTH/{edge}/{device}, retained.
const CertificatesPrefix = "$sparkplug/certificates/"

// ReservedPrefix is the server's namespace: clients may not publish under it.
const ReservedPrefix = "$sparkplug/"

// The message types the server acts on.
const (
	NBIRTH = "NBIRTH"
	NDEATH = "NDEATH"
	DBIRTH = "DBIRTH"
	DDEATH = "DDEATH"
)

// Topic is a Sparkplug B topic of an edge node or a device:
// spBv1.0/{group}/{type}/{edge}[/{device}].
type Topic struct {
	Group, Type, Edge, Device string
}

// Key is the edge node the topic belongs to.
func (t Topic) Key() EdgeKey { return EdgeKey{Group: t.Group, Edge: t.Edge} }

// ParseTopic reads a Sparkplug B topic name of an edge node (N... types:
// four levels) or of a device (D... types: five levels). Any other topic,
// STATE included, is not one (false).
func ParseTopic(topic string) (Topic, bool) {
	rest, ok := strings.CutPrefix(topic, Namespace+"/")
	if !ok {
		return Topic{}, false
	}
	var t Topic
	var more bool
	if t.Group, rest, more = strings.Cut(rest, "/"); !more {
		return Topic{}, false
	}
	if t.Type, rest, more = strings.Cut(rest, "/"); !more {
		return Topic{}, false
	}
	t.Edge, t.Device, more = strings.Cut(rest, "/")
	if t.Group == "" || t.Edge == "" || len(t.Type) < 2 {
		return Topic{}, false
	}
	switch t.Type[0] {
	case 'N':
		if more {
			return Topic{}, false
		}
	case 'D':
		if !more || t.Device == "" || strings.Contains(t.Device, "/") {
			return Topic{}, false
		}
	default:
		return Topic{}, false
	}
	return t, true
}

// CertificateTopic is where the server retains a copy of a birth published
// on topic.
func CertificateTopic(topic string) string { return CertificatesPrefix + topic }
