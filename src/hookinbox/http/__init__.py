"""The HTTP surface: webhooks, health (and later metrics and admin)."""
