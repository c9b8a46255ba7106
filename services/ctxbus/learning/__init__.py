"""Learning from outcomes: the consumer that turns injections and outcomes into item feedback."""
