// Command presenced runs an MQTT broker with presence: see the README and docs/.
package main
