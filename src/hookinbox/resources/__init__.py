"""Tracked resources: declared state machines, the library API that creates and reads
resources, the trace layers and reconcile checks they add for operators, and the outbox
relay that sends the notifications their transitions write."""
