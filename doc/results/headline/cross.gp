set terminal svg size 800,500
set datafile separator ','
set key off
set grid
set output 'dose.svg'
set xlabel 'pre-norm row-start / regular RMS where appended blocks read'
set ylabel 'post-grow - pre-grow (nats/byte)'
plot 'points.csv' every ::1 using 4:5 with points pt 7 ps 0.8, 0.021748334910392308 + -0.002785045983804788 * x with lines lw 2
unset output
set output 'trend.svg'
set key outside
set logscale x 2
set xlabel 'steps per phase (log scale)'
set ylabel 'nats/byte, with 95% intervals'
plot 0 with lines lc 'black' notitle, 'trend.csv' every ::1::4 using 2:3:4 with yerrorlines title 'go, joint: post - pre', 'trend.csv' every ::1::4 using 2:5:6 with yerrorlines title 'go, grow: post - pre', 'trend.csv' every ::1::4 using 2:7:8 with yerrorlines title 'go, I', 'trend.csv' every ::5::5 using 2:3:4 with yerrorlines title 'k16-go, joint: post - pre', 'trend.csv' every ::5::5 using 2:5:6 with yerrorlines title 'k16-go, grow: post - pre', 'trend.csv' every ::5::5 using 2:7:8 with yerrorlines title 'k16-go, I', 'trend.csv' every ::6::6 using 2:3:4 with yerrorlines title 'k37-go, joint: post - pre', 'trend.csv' every ::6::6 using 2:5:6 with yerrorlines title 'k37-go, grow: post - pre', 'trend.csv' every ::6::6 using 2:7:8 with yerrorlines title 'k37-go, I', 'trend.csv' every ::7::7 using 2:3:4 with yerrorlines title 'k4-go, joint: post - pre', 'trend.csv' every ::7::7 using 2:5:6 with yerrorlines title 'k4-go, grow: post - pre', 'trend.csv' every ::7::7 using 2:7:8 with yerrorlines title 'k4-go, I', 'trend.csv' every ::8::8 using 2:3:4 with yerrorlines title 'paper''s optimizer, joint: post - pre', 'trend.csv' every ::8::8 using 2:5:6 with yerrorlines title 'paper''s optimizer, grow: post - pre', 'trend.csv' every ::8::8 using 2:7:8 with yerrorlines title 'paper''s optimizer, I'
unset output
