// Command presence-bench is the load generator of presenced's benchmark: it
// starts each system under test fresh, as a child process on free loopback
// ports, drives it with raw MQTT 3.1.1 clients through each scenario, and
// writes what it measured as a result.File (JSON) plus the Markdown table
// and the latency plot of bench/report.
//
//	presence-bench --systems presenced-memory,presenced-redis,mochi-bare,mosquitto-lastwill,presenced-group \
//	    --scenarios steady,churn,storm,silent,fanout,flap,team --out-dir bench/results
//
// presenced-group is presenced-memory with a groups file; it runs the team
// scenario only (team.go), where it is compared with presenced-memory and
// mosquitto-lastwill watching user topics.
package main
