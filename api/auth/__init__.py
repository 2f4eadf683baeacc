"""Who the caller is and what it may do: authentication providers (token, TLS client
certificate), the one authorisation function, token tools, secret masking and the guard that the
settings assemble."""
