set terminal svg size 800,500
set datafile separator ','
set key off
set grid
set output 'dose.svg'
set xlabel 'pre-norm row-start / regular RMS where appended blocks read'
set ylabel 'post-grow - pre-grow (nats/byte)'
plot 'points.csv' every ::1 using 4:5 with points pt 7 ps 0.8, 0.07388518920149904 + -0.042640336399748686 * x with lines lw 2
unset output
set output 'trend.svg'
set key outside
set logscale x 2
set xlabel 'steps per phase (log scale)'
set ylabel 'nats/byte, with 95% intervals'
plot 0 with lines lc 'black' notitle, 'trend.csv' every ::1 using 2:(strcol(1) eq "go" ? $3 : NaN):(strcol(1) eq "go" ? $4 : NaN) with yerrorlines title 'go, joint: post - pre', 'trend.csv' every ::1 using 2:(strcol(1) eq "go" ? $5 : NaN):(strcol(1) eq "go" ? $6 : NaN) with yerrorlines title 'go, grow: post - pre', 'trend.csv' every ::1 using 2:(strcol(1) eq "go" ? $7 : NaN):(strcol(1) eq "go" ? $8 : NaN) with yerrorlines title 'go, I', 'trend.csv' every ::1 using 2:(strcol(1) eq "paper's optimizer" ? $3 : NaN):(strcol(1) eq "paper's optimizer" ? $4 : NaN) with yerrorlines title 'papers optimizer, joint: post - pre', 'trend.csv' every ::1 using 2:(strcol(1) eq "paper's optimizer" ? $5 : NaN):(strcol(1) eq "paper's optimizer" ? $6 : NaN) with yerrorlines title 'papers optimizer, grow: post - pre', 'trend.csv' every ::1 using 2:(strcol(1) eq "paper's optimizer" ? $7 : NaN):(strcol(1) eq "paper's optimizer" ? $8 : NaN) with yerrorlines title 'papers optimizer, I'
unset output
