package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// The request's headers.
const (
	HeaderSignature = "Presenced-Signature" // t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
	HeaderDelivery  = "Presenced-Delivery"  // the batch's id, the same on each of its attempts
	HeaderAttempt   = "Presenced-Attempt"   // 1 for the first attempt of a batch, 2 for its first retry ...
)

// Signature is the Presenced-Signature header of body, sent at t, under
// secret.
func Signature(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}
