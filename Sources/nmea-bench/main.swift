print("nmea-bench")
