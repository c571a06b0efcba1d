package lifecycle

import "strings"

// Reaches reports whether the topic name or subscription filter f names a
// topic under prefix (prefix itself or below it): "$aws/#",
// "$aws/events/+/connected/x" and "$aws/events/presence/connected/x" all
// reach "$aws/events/presence". The ACL uses it to keep the outputs' topics
// to service accounts.
func Reaches(f, prefix string) bool {
	for {
		pl, prest, pmore := strings.Cut(prefix, "/")
		fl, frest, fmore := strings.Cut(f, "/")
		switch {
		case fl == "#":
			return true
		case fl != "+" && fl != pl:
			return false
		case !pmore:
			return true // every level of prefix matched
		case !fmore:
			return false // f names a topic above prefix
		}
		prefix, f = prest, frest
	}
}
