"""Receiving: the webhook endpoint, the receiver (verify, identify, route) and the batcher
that reserves many deliveries in one commit."""
