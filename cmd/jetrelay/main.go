package main

import jetrelaycmd "github.com/jetrelay/jetrelay/cmd"

func main() { jetrelaycmd.Main() }
