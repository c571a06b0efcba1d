// Command embed is a mochi-mqtt broker of its own, with mochi's
// authentication ledger and mochi's listeners, to which presence is added
// with a few calls (presenced.Attach, Start, Stop). It is the shape of a
// program that already runs mochi and wants presence.
//
// The ledger lets alice and bob in; alice may not read bob's topics nor bob
// alice's; everyone may read presence, and nobody but the broker writes it.
//
//	go run ./examples/embed
//	mosquitto_sub -u bob -P bob-secret -v -t 'presence/users/+'
//	mosquitto_sub -u alice -P alice-secret -i alice-phone -t alice/inbox
//	curl -s localhost:8081/api/v1/users/alice
package main
