"""One module per Kafka API: its translations between the codec and kemu's plain values."""
