// Package configs holds presenced's configuration: one struct whose zero
// values mean "use the default", one function that applies the defaults
// (ApplyDefaults) and one that checks every value (Validate), plus Load, which
// layers defaults < YAML file < PRESENCED_* environment < flags.
//
// Unknown keys are errors, in the file, the environment and the flags, with a
// "did you mean" when a key is close. The one exception: a PRESENCED_*
// variable that matches no setting and whose name has the shape of a
// Kubernetes service link is ignored. Kubernetes puts such variables into
// every pod for every Service in the namespace, so a Service named presenced
// brings PRESENCED_SERVICE_HOST, PRESENCED_SERVICE_PORT, PRESENCED_PORT,
// PRESENCED_PORT_1883_TCP_ADDR and the like, and one named presenced-redis
// brings PRESENCED_REDIS_SERVICE_HOST and so on. The shapes are names ending
// in _SERVICE_HOST, _SERVICE_PORT or _PORT, names with _SERVICE_PORT_<NAME>,
// and names with _PORT_<number>_<TCP|UDP|SCTP>, optionally followed by
// _PROTO, _PORT or _ADDR. No setting's variable has such a shape. LoadWithNotes
// returns the names of the variables it ignored so that the caller can log
// them.
//
// configs/presenced.yaml documents every key with its default value; the
// tests keep it in step with this file.
package configs
