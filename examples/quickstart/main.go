// Command quickstart schedules a few messages and prints each delivery.
package main

func main() {}
