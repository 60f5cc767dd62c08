// Command coffer is agentless backup and recovery for virtual machines.
package main

func main() {}
