package store

import (
	"strconv"
	"strings"
	"sync"
)

// slots is the number of hash slots of a Redis Cluster.
const slots = 16384

// keySlot is the hash slot of a key, as Redis Cluster computes it: CRC16 of
// the key, or of its hash tag (what lies between the first "{" and the
// next "}", when not empty), modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % slots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021), Redis Cluster's key hash.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

var (
	tagsOnce sync.Once
	tags     []string
)

// slotTag returns a short hash tag whose key slot is slot: the shortest
// base-36 number that hashes there, found once for every slot.
func slotTag(slot int) string {
	tagsOnce.Do(func() {
		tags = make([]string, slots)
		left := slots
		for n := 0; left > 0; n++ {
			t := strconv.FormatInt(int64(n), 36)
			if s := crc16(t) % slots; tags[s] == "" {
				tags[s] = t
				left--
			}
		}
	})
	return tags[slot]
}
